"""Every limit of grading, in one place: ``GradingLimits`` (one row per limit, with what it bounds and why).

A limit bounds what one learner can cost the grader or the class: a kernel's memory and
time, what comes back from it, what the grader reads from a learner's folder. The defaults
are ``LIMITS``; tests and the benchmarks pass another ``GradingLimits`` where a smaller
limit shows the bound quickly (``dataclasses.replace(LIMITS, notebook_seconds=20)``). The
command line sets ``cell_seconds`` (``--timeout``).
"""

from __future__ import annotations

from dataclasses import dataclass

GiB, MiB = 2**30, 2**20


@dataclass(frozen=True)
class GradingLimits:
    """The grader's limits. Each field: what it bounds (and, where not obvious, why this size)."""

    # --- time ---------------------------------------------------------------------------------------------
    cell_seconds: float = 60.0  # one notebook cell, or one exercise's check (all the learner's calls in it)
    # one notebook in all: every cell and every check. A course notebook runs in under 30 s (README), a graded
    # one in under 60 s on a loaded machine; ten times that leaves room, and a notebook of cells each just under
    # cell_seconds can no longer take half an hour
    notebook_seconds: float = 600.0
    interrupt_grace: float = 10.0  # after the interrupt past a time limit, before the kernel is killed
    startup_seconds: float = 120.0  # a kernel becoming ready
    # --- one kernel's sandbox --------------------------------------------------------------------------------
    memory_bytes: int = 6 * GiB  # all processes of a kernel together (cgroup or watchdog), and each one's address space
    max_processes: int = 256  # processes (and threads) of a kernel
    cpu_seconds: int = 900  # CPU time of a kernel process over its whole life
    file_bytes: int = 256 * MiB  # largest file a kernel may write
    tmp_bytes: int = 512 * MiB  # its private /tmp, and its /dev/shm
    # The kernel's folder (home, TMPDIR, working folder): a notebook needs little there (matplotlib's and
    # IPython's settings, its sockets: 144 KiB after notebook 01 top to bottom); one largest file fits.
    folder_bytes: int = 256 * MiB
    watch_seconds: float = 0.5  # how often the watchdog adds up a kernel's memory (no cgroup)
    # --- what comes back from a kernel -----------------------------------------------------------------------
    message_bytes: int = 64 * MiB  # one message from the kernel (ZeroMQ drops larger ones)
    output_chars: int = 1_000_000  # a cell's stored output, for comparing with the course run
    replies: int = 4  # agent replies kept per check request (only the one with the nonce counts)
    # --- what the grader reads from a class folder ----------------------------------------------------------
    notebook_bytes: int = 100 * MiB  # one learner file (larger ones are not read)
    notebook_json_objects: int = 200_000  # JSON objects in one notebook file (a million empty cells: ~2 GB parsed)
    learner_bytes: int = 200 * MiB  # all of one learner's files together (the rest are named, not read)
    learner_notebooks: int = 30  # notebooks graded per learner (five copies of each of six notebooks)
    folder_depth: int = 8  # folder levels searched below the class folder
    folder_entries: int = 100_000  # entries listed in the whole class folder
    table_seconds: float = 2.0  # grades.md/grades.csv rewritten at most this often while grading (and at the end)

    @property
    def writable_bytes(self) -> int:
        """All a confined kernel can write: its folder and its two memory folders, far below ``memory_bytes``."""
        return self.folder_bytes + 2 * self.tmp_bytes


LIMITS = GradingLimits()
