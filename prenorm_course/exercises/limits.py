"""Every limit of grading, in one place: ``GradingLimits`` (one row per limit, with what it bounds and why).

A limit bounds what one learner can cost the grader or the class: a kernel's memory and
time, what comes back from it, what the grader reads from a learner's folder. The defaults
are ``LIMITS``; tests and the benchmarks pass another ``GradingLimits`` where a smaller
limit shows the bound quickly (``dataclasses.replace(LIMITS, notebook_seconds=20)``). The
command line sets ``cell_seconds`` (``--timeout``). ``python -m prenorm_course.exercises.limits``
prints the table ``docs/grader.md`` shows (a test holds the two equal).
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields

GiB, MiB = 2**30, 2**20


def _limit(default: float, unit: str, bounds: str) -> float:
    return field(default=default, metadata={"unit": unit, "bounds": bounds})


@dataclass(frozen=True)
class GradingLimits:
    """The grader's limits; each field's metadata says its unit and what it bounds."""

    # --- time
    cell_seconds: float = _limit(60.0, "s", "one notebook cell, or one exercise's check (all its calls)")
    notebook_seconds: float = _limit(
        600.0, "s", "one notebook in all, every cell and check (a course notebook runs in under 30 s, and graded "
        "with its checks in a few minutes on a loaded machine): cells each just under the cell limit can no longer "
        "take half an hour")
    interrupt_grace: float = _limit(10.0, "s", "after the interrupt past a time limit, before the kernel is killed")
    startup_seconds: float = _limit(120.0, "s", "a kernel becoming ready")
    # --- one kernel's sandbox
    memory_bytes: int = _limit(6 * GiB, "bytes", "all processes of a kernel together (a cgroup, or the grader's "
                               "watchdog), and each process's address space")
    max_processes: int = _limit(256, "", "processes and threads of a kernel")
    cpu_seconds: int = _limit(900, "s", "CPU time of one kernel process over its life")
    file_bytes: int = _limit(256 * MiB, "bytes", "the largest file a kernel may write")
    tmp_bytes: int = _limit(512 * MiB, "bytes", "its private /tmp, and its /dev/shm (memory)")
    folder_bytes: int = _limit(256 * MiB, "bytes", "its own folder: home, TMPDIR, working folder (memory; notebook "
                               "01 top to bottom uses 144 KiB of it)")
    watch_seconds: float = _limit(0.5, "s", "how often the watchdog adds up a kernel's memory (no cgroup)")
    # --- what comes back from a kernel
    message_bytes: int = _limit(64 * MiB, "bytes", "one message from the kernel (larger ones are dropped)")
    output_chars: int = _limit(1_000_000, "characters", "a cell's stored output, widget messages included")
    replies: int = _limit(4, "", "agent replies kept per check request (the one with the request's nonce counts)")
    # --- what the grader reads from a class folder
    notebook_bytes: int = _limit(100 * MiB, "bytes", "one learner file (a larger one is named, not read)")
    notebook_json_objects: int = _limit(50_000, "", "JSON objects in one file (a course notebook has 104 to 434; a "
                                        "million empty cells parse to 2 GB)")
    learner_bytes: int = _limit(200 * MiB, "bytes", "one learner's files together (the rest are named, not read)")
    learner_notebooks: int = _limit(30, "", "notebooks graded per learner (the rest are named)")
    folder_depth: int = _limit(8, "levels", "folders searched below the class folder (a learner's own is level 1)")
    learner_entries: int = _limit(10_000, "", "files and folders listed in one learner's folder")

    @property
    def writable_bytes(self) -> int:
        """All a confined kernel can write: its folder and its two memory folders, far below ``memory_bytes``."""
        return self.folder_bytes + 2 * self.tmp_bytes

    def table(self) -> str:
        """The limits as a Markdown table: name, value, what it bounds."""
        rows = ["| limit | value | bounds |", "|---|---|---|"]
        for spec in fields(self):
            rows.append(f"| `{spec.name}` | {_shown(getattr(self, spec.name), spec.metadata['unit'])} | "
                        f"{spec.metadata['bounds']} |")
        return "\n".join(rows)


def _shown(value: float, unit: str) -> str:
    if unit == "bytes":
        return f"{value // GiB} GiB" if value % GiB == 0 else f"{value // MiB} MiB"
    return f"{value:,g} {unit}".strip() if isinstance(value, float) else f"{value:,} {unit}".strip()


LIMITS = GradingLimits()

if __name__ == "__main__":
    print(LIMITS.table())
