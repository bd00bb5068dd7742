"""Command line: ``python -m prenorm_course.gradescope build OUT.zip`` and ``... run`` (in the container)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prenorm_course.exercises.check import DEFAULT_TIMEOUT
from prenorm_course.exercises.paths import repo_root
from prenorm_course.gradescope.autograder_zip import build_zip
from prenorm_course.gradescope.results import failure_results, grade_submission, write_results


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.gradescope",
                                     description="The course's grader as a Gradescope autograder.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--root", type=Path, help="course root (default: $PRENORM_ROOT or the current folder)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    build = commands.add_parser("build", parents=[common], help="write the autograder zip to upload to Gradescope")
    build.add_argument("out", type=Path, help="the zip to write, e.g. dist/gradescope-autograder.zip")
    build.add_argument("--notebooks", nargs="*", metavar="NN",
                       help="the course notebooks the assignment grades, by number (default: all)")
    run = commands.add_parser("run", parents=[common], help="grade /autograder/submission (what run_autograder calls)")
    run.add_argument("--submission", type=Path, required=True)
    run.add_argument("--results", type=Path, required=True, help="where results.json goes")
    run.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                     help=f"time limit per notebook cell in seconds (default {DEFAULT_TIMEOUT:g})")
    return parser


def main(argv: list[str] | None = None) -> int:
    sys.dont_write_bytecode = True
    args = _parser().parse_args(argv)
    if args.command == "build":
        try:
            notebooks = build_zip(repo_root(args.root), args.out, args.notebooks)
        except (ValueError, FileNotFoundError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {args.out} (grades {', '.join(notebooks)})")
        return 0
    try:
        results = grade_submission(args.submission, repo_root(args.root), args.timeout)
    except Exception as exc:  # the grader failing must reach the teacher as a result, not as a missing file
        write_results(failure_results(f"{type(exc).__name__}: {exc}"), args.results)
        raise
    write_results(results, args.results)
    for test in results["tests"]:
        print(f"{test['score']:g}/{test['max_score']:g}  {test['output'].splitlines()[0]}")
    print(f"score {results['score']:g}; wrote {args.results}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
