"""Command line of the exercise tool: ``python -m prenorm_course.exercises --help``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prenorm_course.exercises.build import build_all, stale_notebooks
from prenorm_course.exercises.check import DEFAULT_TIMEOUT, GradingError, check_path, format_report
from prenorm_course.exercises.grade import grade_folder
from prenorm_course.exercises.markers import NotebookError
from prenorm_course.exercises.paths import ROOT_ENV, repo_root
from prenorm_course.exercises.sandbox import ConfinementUnavailable
from prenorm_course.exercises.verify import verify


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m prenorm_course.exercises",
        description="Build, check, grade and verify the prenorm course exercises. "
        f"The course root is --root, else ${ROOT_ENV}, else the current folder.",
    )
    parser.add_argument("--root", type=Path, help=f"course root (default: ${ROOT_ENV} or the current folder)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    build = commands.add_parser("build", help="write notebooks/exercises/ from notebooks/NN_*.ipynb",
                                description="Replace every solution region by a placeholder, drop the outputs "
                                "of exercise and check cells, and write the exercise notebooks (idempotent, "
                                "byte-stable).")
    build.add_argument("--check", action="store_true",
                       help="write nothing; list exercise notebooks that are out of date and exit 1 if any")
    build.add_argument("--force", action="store_true",
                       help="overwrite exercise notebooks even if they hold filled-in answers")

    timeout = argparse.ArgumentParser(add_help=False)
    timeout.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="S",
                         help=f"time limit per notebook cell in seconds (default {DEFAULT_TIMEOUT:g})")
    timeout.add_argument("--trusted", action="store_true",
                         help="run learner code WITHOUT confinement if bubblewrap cannot be used here (only for "
                         "notebooks you trust; every report says so)")

    check = commands.add_parser("check", parents=[timeout], help="check your exercise notebook",
                                description="Run your code inside the course notebook, in its own kernel, and "
                                "say per exercise whether it passed, gives a hint, or is not done yet. Exit 0 "
                                "only if every exercise passes and every other cell matches the course run.")
    check.add_argument("path", type=Path, help="your notebook, e.g. notebooks/exercises/01_rmsnorm.ipynb")
    check.add_argument("--verbose", "-v", action="store_true", help="also show the kernel's peak memory")

    grade = commands.add_parser("grade", parents=[timeout], help="grade a folder of learner notebooks",
                                description="Check every notebook in FOLDER (FOLDER/<learner>/*.ipynb or "
                                "FOLDER/<learner>.ipynb) and write grades.md and grades.csv (a status per exercise, "
                                "points, maximum and percentage per notebook; last saved and late when FOLDER holds "
                                "the collection.json of `collect --due`), and feedback/<learner>/ for each learner. "
                                "Each notebook runs in its own kernel in bubblewrap (no network, own process and mount "
                                "namespaces, read-only system; as root, its own unprivileged user); without "
                                "bubblewrap the run refuses unless --trusted is given.")
    grade.add_argument("folder", type=Path)
    grade.add_argument("--out", type=Path, help="folder for grades.md/grades.csv and feedback/ (default: FOLDER)")
    grade.add_argument("--jobs", type=int, default=2, help="notebooks checked at once (default 2)")
    grade.add_argument("--learner", action="append", metavar="NAME",
                       help="grade only this learner (repeat for more): their rows in OUT's tables are replaced, "
                       "everyone else's kept")

    verify_cmd = commands.add_parser("verify", parents=[timeout], help="CI: prove the exercise loop",
                                     description="Exercise notebooks are up to date; each unfilled one runs to "
                                     "the end with every exercise 'not done yet' (so the check fails); each "
                                     "filled-in one passes.")
    verify_cmd.add_argument("--jobs", type=int, default=2, help="notebooks run at once (default 2)")
    return parser


def main(argv: list[str] | None = None) -> int:
    sys.dont_write_bytecode = True  # no bytecode of ours is written where a kernel could have left some
    args = _parser().parse_args(argv)
    try:
        root = repo_root(args.root)
        if args.command == "build":
            if args.check:
                stale = stale_notebooks(root)
                for message in stale:
                    print(message)
                if stale:
                    print("run `python -m prenorm_course.exercises build` to update them")
                return 1 if stale else 0
            for path in build_all(root, force=args.force):
                print(f"wrote {path.relative_to(root)}")
            return 0
        if args.command == "check":
            result = check_path(args.path, root, args.timeout, trusted=args.trusted)
            print(format_report(result, args.verbose))
            return 0 if result.passed else 1
        if args.command == "grade":
            out = args.out or args.folder
            grade_folder(args.folder, out, root, args.timeout, args.jobs, trusted=args.trusted, learners=args.learner)
            print(f"wrote {out / 'grades.md'}, {out / 'grades.csv'} and {out / 'feedback'}/<learner>/")
            return 0
        return 0 if verify(root, args.timeout, args.jobs, trusted=args.trusted) else 1
    except ConfinementUnavailable as exc:
        print(f"refused: {exc}", file=sys.stderr)
        return 3
    except (NotebookError, GradingError, FileNotFoundError, NotADirectoryError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
