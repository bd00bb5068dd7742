"""Experiment records: runs too long for a notebook, made once by a command, plotted by the notebook.

A notebook has a budget of seconds; a fair comparison (several variants, paired seeds,
enough updates) can take minutes. Such an experiment lives in a module of this package
and is run by ``python -m prenorm_lib.lab.experiments run NAME`` (``make experiment NAME=…``;
``make experiments`` runs them all). The run writes a small JSON record,
``results/NAME.json``: the configuration, every seed's curves, the library and machine it
ran on, the wall time and the git commit. The notebook loads the record with
:func:`load`, plots it, says how it was made, and runs a short live version itself.

Where records live: ``prenorm_lib/lab/experiments/results/`` (:data:`RESULTS_DIR`), inside
the package, so an installed wheel carries them and a notebook finds them from any folder.
``make experiment`` writes there. The environment variable ``PRENORM_RESULTS`` names
another folder to read records from and write them to (a learner re-making a record
without touching the installed ones).

An experiment module defines

- ``DESCRIPTION``: one line saying what it measures;
- ``CONFIG``: a JSON-like dict of everything that decides the result, ``"seeds"`` included;
- ``run_seed(config, seed) -> dict``: one seed's results (numbers, lists, strings);
- optionally ``MAX_JOBS``: the most seeds run at once, whatever ``--jobs`` says (1 for a
  timing experiment, whose seeds would otherwise compete for the cores they measure).

A record whose configuration differs from the module's ``CONFIG`` is *stale*: :func:`load`
refuses it, and the test suite fails, until the experiment is run again.

The code can change without the configuration changing. A module may therefore also define
``FINGERPRINT``: overrides of ``CONFIG`` that shrink the run to a few seconds (fewer updates,
one seed). A full run stores that small run's results in the record, and :func:`drift`
repeats it with today's code: different numbers mean the record was made by code that no
longer computes the same thing (the test suite checks every record this way). Timing
experiments have no fingerprint: their numbers differ on every run.

"Different" allows for the last bits: another CPU, or another of torch's and MKL's code
paths on the same CPU (AVX-512, AVX2, no SIMD), rounds differently, and a few updates of
training can amplify that. :data:`FINGERPRINT_RTOL` is derived from measurements of that
spread (``python -m prenorm_lib.lab.experiments spread`` re-runs every fingerprint under
each of :data:`CODE_PATHS` and prints how far the numbers move), with a margin; it is an
order of magnitude below what a real code change moves (the tests change the code on
purpose and check that drift is caught).
"""

from __future__ import annotations

import importlib
import json
import math
import os
import pkgutil
import platform
import subprocess
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import asdict, dataclass
from multiprocessing import get_context
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

# The one place records live (package data: shipped in the wheel). PRENORM_RESULTS overrides it.
RESULTS_DIR = Path(__file__).resolve().with_name("results")
RESULTS_ENV = "PRENORM_RESULTS"
REQUIRED = ("DESCRIPTION", "CONFIG", "run_seed")


class StaleRecordError(RuntimeError):
    """A record made with another configuration than the code's, or none at all."""


@dataclass
class Record:
    """One experiment's results, as written to ``results/NAME.json``."""

    name: str
    description: str
    config: dict[str, Any]
    runs: dict[str, dict[str, Any]]  # seed (as a string: JSON keys) -> that seed's results
    environment: dict[str, Any]
    wall_seconds: float
    commit: str
    command: str
    fingerprint: dict[str, Any] | None = None  # {"config": the small run's config, "result": its results}

    def by_seed(self) -> list[tuple[int, dict[str, Any]]]:
        """``(seed, results)`` in the order of ``config["seeds"]``."""
        return [(seed, self.runs[str(seed)]) for seed in self.config["seeds"]]

    def made_how(self) -> str:
        """One line for the notebook: the command, the time it took and where it ran."""
        env = self.environment
        device = env.get("device", "cpu")  # records older than the device setting ran on the CPU
        where = env["cpu"] if device == "cpu" else f"{device} ({env['cpu']})"
        return (
            f"made by `{self.command}` in {self.wall_seconds / 60:.1f} min on {where} "
            f"({env['jobs']} process(es) × {env['threads_per_run']} thread), torch {env['torch']}, "
            f"commit {self.commit[:12]}"
        )


def available() -> list[str]:
    """The names of every experiment module, sorted."""
    return sorted(
        info.name for info in pkgutil.iter_modules([str(Path(__file__).parent)]) if not info.name.startswith("_")
    )


def experiment(name: str) -> ModuleType:
    """The module of experiment ``name``, checked for what a record needs."""
    names = available()
    if name not in names:
        raise ValueError(f"name must be one of the experiments {names}, got {name!r}")
    module = importlib.import_module(f"{__name__}.{name}")
    missing = [attribute for attribute in REQUIRED if not hasattr(module, attribute)]
    if missing:
        raise TypeError(f"experiment module {name} must define {', '.join(missing)}")
    if not isinstance(module.CONFIG.get("seeds"), list | tuple) or not module.CONFIG["seeds"]:
        raise TypeError(f"{name}.CONFIG must list its seeds under 'seeds'")
    return module


def _plain(config: dict[str, Any]) -> dict[str, Any]:
    """The configuration as JSON gives it back (tuples become lists), for comparisons."""
    return json.loads(json.dumps(config))


def default_results_dir() -> Path:
    """Where records are read and written: ``$PRENORM_RESULTS`` if set, else :data:`RESULTS_DIR`."""
    override = os.environ.get(RESULTS_ENV)
    return Path(override).expanduser() if override else RESULTS_DIR


def record_path(name: str, results_dir: Path | None = None) -> Path:
    return (default_results_dir() if results_dir is None else Path(results_dir)) / f"{name}.json"


def _commit() -> str:
    """The git commit of the library's checkout (with a mark if its code has uncommitted changes), or "unknown"."""
    import prenorm_lib

    package = Path(prenorm_lib.__file__).resolve().parent  # the library's code, not the course around it
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=package, capture_output=True, text=True, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--", ".", f":(exclude){RESULTS_DIR}"], cwd=package,
                               capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return head.stdout.strip() + ("+uncommitted-changes" if dirty.stdout.strip() else "")


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def environment(jobs: int) -> dict[str, Any]:
    """What the numbers depend on besides the code: versions, processor, parallelism."""
    import numpy

    from prenorm_lib.lab.train import default_device

    return {
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(terse=True),
        "cpu": _cpu(),
        "cpu_count": os.cpu_count(),
        "jobs": jobs,
        "threads_per_run": 1,
        "device": str(default_device()),  # $PRENORM_DEVICE: cpu unless a learner chose a GPU
    }


def _run_one(name: str, config: dict[str, Any], seed: int) -> tuple[int, dict[str, Any], float]:
    """One seed in a worker process: one torch thread, the module's own code."""
    torch.set_num_threads(1)
    start = time.perf_counter()
    result = experiment(name).run_seed(config, seed)
    return seed, result, time.perf_counter() - start


def run(
    name: str,
    config: dict[str, Any] | None = None,
    jobs: int = 1,
    write: bool = False,
    results_dir: Path | None = None,
    log=print,
) -> Record:
    """Run experiment ``name`` over its seeds and return the record (written only if ``write``).

    ``config`` defaults to the module's ``CONFIG``; a notebook passes a smaller one for its
    live version (same code, fewer updates or seeds). ``jobs`` > 1 runs seeds in separate
    processes, one torch thread each, so results do not depend on ``jobs``.
    """
    module = experiment(name)
    jobs = min(jobs, getattr(module, "MAX_JOBS", jobs))
    config = _plain(module.CONFIG if config is None else config)
    seeds = list(config["seeds"])
    start = time.perf_counter()
    runs: dict[str, dict[str, Any]] = {}
    if jobs > 1:
        with ProcessPoolExecutor(max_workers=jobs, mp_context=get_context("spawn")) as pool:
            futures = [pool.submit(_run_one, name, config, seed) for seed in seeds]
            for future in futures:
                seed, result, seconds = future.result()
                runs[str(seed)] = result
                log(f"{name}: seed {seed} done in {seconds:.0f} s")
    else:
        threads = torch.get_num_threads()
        try:
            for seed in seeds:
                seed, result, seconds = _run_one(name, config, seed)
                runs[str(seed)] = result
        finally:
            torch.set_num_threads(threads)
    record = Record(
        name=name,
        description=module.DESCRIPTION,
        config=config,
        runs=_plain(runs),
        environment=environment(jobs),
        wall_seconds=round(time.perf_counter() - start, 1),
        commit=_commit(),
        command=f"make experiment NAME={name}",
    )
    if config == _plain(module.CONFIG) and hasattr(module, "FINGERPRINT"):
        record.fingerprint = fingerprint(name)
    if write:
        path = record_path(name, results_dir)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(asdict(record), indent=1) + "\n", encoding="utf-8")
        log(f"wrote {path.relative_to(path.parents[1])} ({record.wall_seconds / 60:.1f} min)")
    return record


def read(name: str, results_dir: Path | None = None) -> Record:
    """The record of ``name`` as stored, stale or not."""
    path = record_path(name, results_dir)
    if not path.is_file():
        raise StaleRecordError(f"no record {path.name} yet: run `make experiment NAME={name}`")
    return Record(**json.loads(path.read_text(encoding="utf-8")))


def staleness(name: str, results_dir: Path | None = None) -> str | None:
    """Why the record of ``name`` cannot be used (missing, or made with another config), or None."""
    try:
        record = read(name, results_dir)
    except StaleRecordError as error:
        return str(error)
    current = _plain(experiment(name).CONFIG)
    if record.config != current:
        changed = sorted(k for k in current.keys() | record.config.keys() if current.get(k) != record.config.get(k))
        return (f"{name}.json was made with another configuration (differs in {', '.join(changed)}): "
                f"run `make experiment NAME={name}`")
    missing = [seed for seed in current["seeds"] if str(seed) not in record.runs]
    if missing:
        return f"{name}.json lacks seeds {missing}: run `make experiment NAME={name}`"
    return None


def fingerprint(name: str, threads: int = 1) -> dict[str, Any]:
    """The small run that pins down what today's code computes: ``CONFIG`` with ``FINGERPRINT`` applied.

    It runs on the CPU, whatever ``$PRENORM_DEVICE`` says (a record made on a GPU is still
    checked on CI's CPU), on one torch thread, as every seed of a record does (``threads``
    exists to measure what a second thread would change, see :func:`spread`).
    """
    from prenorm_lib.lab.train import DEVICE_ENV

    module = experiment(name)
    config = _plain({**module.CONFIG, **module.FINGERPRINT})
    previous, device = torch.get_num_threads(), os.environ.get(DEVICE_ENV)
    os.environ[DEVICE_ENV] = "cpu"  # on the CPU wherever the record was made: CI compares it there
    try:
        if threads == 1:
            _, result, _ = _run_one(name, config, config["seeds"][0])
        else:
            torch.set_num_threads(threads)
            result = module.run_seed(config, config["seeds"][0])
    finally:
        torch.set_num_threads(previous)
        if device is None:
            del os.environ[DEVICE_ENV]
        else:
            os.environ[DEVICE_ENV] = device
    return {"config": config, "result": _plain(result)}


# Relative tolerance of drift(): how far a fingerprint's numbers may move before the record
# counts as made by other code. Measured (`python -m prenorm_lib.lab.experiments spread`) on an
# AMD EPYC (Zen 5, AVX-512) against records made on an Intel Xeon, under each of CODE_PATHS:
# ffn_ablation's fingerprint did not move at all; rope_positions' and warmup_grid's moved by at
# most one unit of their stored rounding (3.1076 vs 3.1077: 3.2e-5 relative, MEASURED_SPREAD),
# and beyond the rounding by at most 1.9e-6 (a diverging loss, 74844790.58 vs 74844930.72).
# drift() allows one unit of the rounding (ROUNDING_SLACK) plus FINGERPRINT_RTOL, SPREAD_MARGIN
# times the largest move, for CPUs not measured here. A real change of the code
# moves a fingerprint by far more (tests/lab/test_experiments.py makes one on purpose).
# (frontier_lr_sweep's fingerprint at lr 0.1 moved 3e-2: training at that rate amplifies last
# bits, so no tolerance can tell them from a change; its fingerprint must run at a lower rate.)
MEASURED_SPREAD = 3.2e-5
SPREAD_MARGIN = 3
FINGERPRINT_RTOL = SPREAD_MARGIN * MEASURED_SPREAD
FINGERPRINT_ATOL = 1e-12
ROUNDING_SLACK = 1.01  # one unit of a stored number's last decimal, and a hair for binary floats

# The code paths one CPU can take, which stand in for other CPUs: (label, environment, threads).
CODE_PATHS: tuple[tuple[str, dict[str, str], int], ...] = (
    ("this CPU, 1 thread", {}, 1),
    ("this CPU, 2 threads", {}, 2),
    ("ATen without SIMD", {"ATEN_CPU_CAPABILITY": "default"}, 1),
    ("ATen AVX2", {"ATEN_CPU_CAPABILITY": "avx2"}, 1),
    ("ATen AVX2 + MKL AVX2", {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2"}, 1),
)
_CODE_PATH_VARIABLES = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR")


def _numbers(value: Any, path: str):
    """``(path, number)`` for every number of a JSON-like value, in order."""
    if isinstance(value, dict):
        for key in value:
            yield from _numbers(value[key], f"{path}.{key}")
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _numbers(item, f"{path}[{i}]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield path, value


def last_decimal(stored: int | float) -> float:
    """One unit of the last decimal a stored number was rounded to (4.4936 -> 1e-4, 212.81 -> 0.01); 0 for an int.

    Records round what they store; a last-bit difference can move a number across a
    rounding boundary, which changes it by one such unit however small the difference was.
    """
    text = repr(stored)
    if isinstance(stored, int) or "e" in text or "." not in text:
        return 0.0
    return 10.0 ** -len(text.split(".", 1)[1])


def relative_move(stored: Any, fresh: Any, name: str = "") -> tuple[float, str]:
    """The largest relative difference between the numbers of two results of the same shape, and where.

    A difference of one unit of the stored number's last decimal (see :func:`last_decimal`) counts as none.
    """
    worst, where = 0.0, ""
    fresh_numbers = dict(_numbers(fresh, name))
    for path, a in _numbers(stored, name):
        b = fresh_numbers.get(path)
        if b is None or (math.isnan(a) and math.isnan(b)):
            continue
        move = max(0.0, abs(a - b) - ROUNDING_SLACK * last_decimal(a)) / max(abs(a), abs(b), 1e-12)
        if move > worst:
            worst, where = move, f"{path}: {a!r} vs {b!r}"
    return worst, where


def fingerprint_elsewhere(name: str, environment: dict[str, str], threads: int = 1) -> dict[str, Any]:
    """:func:`fingerprint` in a fresh Python with ``environment`` (torch reads its code path when it starts)."""
    env = {k: v for k, v in os.environ.items() if k not in _CODE_PATH_VARIABLES} | environment
    done = subprocess.run(
        [sys.executable, "-m", __name__, "fingerprint", name, "--threads", str(threads)],
        env=env, capture_output=True, text=True, check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"fingerprint of {name} under {environment} failed:\n{done.stderr[-2000:]}")
    return json.loads(done.stdout)


def spread(name: str, log=print) -> dict[str, float]:
    """How far ``name``'s fingerprint moves under each of :data:`CODE_PATHS`: label -> largest relative move.

    Moves are measured from the stored record's fingerprint when it has a current one, else
    from the first code path.
    """
    module = experiment(name)
    if not hasattr(module, "FINGERPRINT"):
        return {}
    expected = _plain({**module.CONFIG, **module.FINGERPRINT})
    try:
        stored = read(name).fingerprint
    except StaleRecordError:
        stored = None
    reference = stored["result"] if stored and stored["config"] == expected else None
    moves: dict[str, float] = {}
    for label, environment, threads in CODE_PATHS:
        result = fingerprint_elsewhere(name, environment, threads)["result"]
        if reference is None:
            reference = result
        moves[label], where = relative_move(reference, result, name)
        log(f"{name:20} {label:22} {moves[label]:.2e}  {where}")
    return moves


def _first_difference(stored: Any, fresh: Any, path: str, rtol: float) -> str | None:
    """Where two JSON-like results differ (floats within ``rtol``); None if nowhere."""
    if isinstance(stored, dict) and isinstance(fresh, dict):
        if stored.keys() != fresh.keys():
            return f"{path}: keys {sorted(stored.keys() ^ fresh.keys())} in only one of them"
        for key in stored:
            found = _first_difference(stored[key], fresh[key], f"{path}.{key}", rtol)
            if found:
                return found
        return None
    if isinstance(stored, list) and isinstance(fresh, list):
        if len(stored) != len(fresh):
            return f"{path}: {len(stored)} values stored, {len(fresh)} now"
        for i, (a, b) in enumerate(zip(stored, fresh, strict=True)):
            found = _first_difference(a, b, f"{path}[{i}]", rtol)
            if found:
                return found
        return None
    numbers = (int, float)
    if isinstance(stored, numbers) and isinstance(fresh, numbers) and not isinstance(stored, bool):
        allowed = rtol * max(abs(stored), abs(fresh)) + ROUNDING_SLACK * last_decimal(stored) + FINGERPRINT_ATOL
        same = abs(stored - fresh) <= allowed or (math.isnan(stored) and math.isnan(fresh))
        return None if same else f"{path}: {stored!r} stored, {fresh!r} now"
    return None if stored == fresh else f"{path}: {stored!r} stored, {fresh!r} now"


def drift(name: str, results_dir: Path | None = None, rtol: float | None = None) -> str | None:
    """Why the record of ``name`` no longer matches what the code computes, or None.

    Re-runs the record's fingerprint (a few seconds) and compares its results, floats to
    ``rtol`` (default :data:`FINGERPRINT_RTOL`: other CPUs and code paths round the last bits
    differently, see :func:`spread`). None for an experiment without
    ``FINGERPRINT`` (timings) and for a record that is stale anyway (see :func:`staleness`).
    """
    module = experiment(name)
    if not hasattr(module, "FINGERPRINT") or staleness(name, results_dir):
        return None
    record = read(name, results_dir)
    command = f"run `make experiment NAME={name}`"
    expected = _plain({**module.CONFIG, **module.FINGERPRINT})
    if record.fingerprint is None or record.fingerprint["config"] != expected:
        return f"{name}.json has no fingerprint for the code's FINGERPRINT: {command}"
    fresh = fingerprint(name)
    rtol = FINGERPRINT_RTOL if rtol is None else rtol
    difference = _first_difference(record.fingerprint["result"], fresh["result"], name, rtol)
    if difference:
        return f"{name}.json was made by code that computes differently now ({difference}): {command}"
    return None


def load(name: str, results_dir: Path | None = None) -> Record:
    """The record of ``name``; raises StaleRecordError if it does not match the code's CONFIG."""
    problem = staleness(name, results_dir)
    if problem:
        raise StaleRecordError(problem)
    return read(name, results_dir)


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m prenorm_lib.lab.experiments", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("list", help="every experiment, whether its record is current, and how long it took")
    run_cmd = commands.add_parser("run", help="run experiments and write their records to results/")
    run_cmd.add_argument("names", nargs="*", help="experiments to run (default: all)")
    run_cmd.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="seeds run at once (processes)")
    run_cmd.add_argument("--stale-only", action="store_true", help="skip experiments whose record is current")
    commands.add_parser("check", help="exit 1 if any record is missing, stale, or made by code that has changed")
    spread_cmd = commands.add_parser("spread", help="how far each fingerprint moves under other CPU code paths")
    spread_cmd.add_argument("names", nargs="*", help="experiments to measure (default: all with a fingerprint)")
    print_cmd = commands.add_parser("fingerprint", help="print one experiment's fingerprint run as JSON")
    print_cmd.add_argument("name")
    print_cmd.add_argument("--threads", type=int, default=1)
    args = parser.parse_args(argv)
    if args.command == "fingerprint":
        print(json.dumps(fingerprint(args.name, threads=args.threads)))
        return 0
    if args.command == "spread":
        worst = max((max(spread(name).values(), default=0.0) for name in args.names or available()), default=0.0)
        print(f"largest relative move {worst:.2e}; drift() allows {FINGERPRINT_RTOL:.2e}")
        return 0 if worst <= FINGERPRINT_RTOL else 1
    if args.command == "list":
        for name in available():
            problem = staleness(name)
            state = problem or f"current, {read(name).wall_seconds / 60:.1f} min"
            print(f"{name:28} {experiment(name).DESCRIPTION}\n{'':28} {state}")
        return 0
    if args.command == "check":
        problems = [p for name in available() for p in (staleness(name) or drift(name),) if p]
        for problem in problems:
            print(problem)
        return 1 if problems else 0
    for name in args.names or available():
        if args.stale_only and staleness(name) is None:
            print(f"{name}: record is current, skipped")
            continue
        run(name, jobs=args.jobs, write=True)
    return 0
