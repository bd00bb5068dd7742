"""Command line: ``python -m prenorm_course.hub prepare|serve|learners|link|collect`` (as root)."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from prenorm_course.exercises.paths import repo_root
from prenorm_course.hub import accounts
from prenorm_course.hub.collect import collect
from prenorm_course.hub.config import config_text, pull_link
from prenorm_course.hub.environment import BRANCH, prepare

DEFAULT_HUB = Path("/srv/prenorm-hub")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.hub",
                                     description="The course on a JupyterHub: one class on one server.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, default=DEFAULT_HUB, help=f"the hub's folder (default {DEFAULT_HUB})")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("prepare", parents=[common], help="make the hub folder: venv, proxy, course repository")
    serve = commands.add_parser("serve", parents=[common], help="write jupyterhub_config.py and run the hub")
    serve.add_argument("--ip", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    learners = commands.add_parser("learners", help="add or remove learners' Unix accounts")
    learners.add_argument("action", choices=["add", "remove"])
    learners.add_argument("names", nargs="+")
    link = commands.add_parser("link", parents=[common], help="print the nbgitpuller link to hand out")
    link.add_argument("--url", default="http://127.0.0.1:8000", help="the hub's address as learners reach it")
    link.add_argument("--notebook", help="open this exercise notebook, e.g. 01_rmsnorm.ipynb")
    gather = commands.add_parser("collect", help="copy learners' exercise notebooks into FOLDER/<learner>/")
    gather.add_argument("folder", type=Path)
    gather.add_argument("--learners", nargs="+", required=True)
    gather.add_argument("--notebooks", nargs="+", required=True, metavar="NAME", help="e.g. 01_rmsnorm.ipynb")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "prepare":
            prepare(repo_root(), args.dir)
            print(f"the hub folder {args.dir} is ready; run: python -m prenorm_course.hub serve --dir {args.dir}")
        elif args.command == "serve":
            config = args.dir.resolve() / "jupyterhub_config.py"
            config.write_text(config_text(args.dir.resolve(), args.ip, args.port))
            os.chdir(args.dir.resolve() / "state")
            hub = str(args.dir.resolve() / "venv" / "bin" / "jupyterhub")
            os.execv(hub, [hub, "-f", str(config)])
        elif args.command == "learners":
            for name in args.names:
                if args.action == "add":
                    print(f"{name}: home {accounts.add(name)} (mode 0700); set a password with: passwd {name}")
                else:
                    accounts.remove(name)
                    print(f"{name}: removed, with its home")
        elif args.command == "link":
            repo = f"file://{args.dir.resolve() / 'course.git'}"
            print(pull_link(args.url, repo, BRANCH, args.notebook))
        else:
            missing = collect(args.folder, args.learners, args.notebooks)
            for line in missing:
                print(f"missing: {line}")
            print(f"collected into {args.folder}; grade with: python -m prenorm_course.exercises grade {args.folder}")
    except (ValueError, FileNotFoundError, PermissionError, KeyError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
