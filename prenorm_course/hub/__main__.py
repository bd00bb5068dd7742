"""Command line: ``python -m prenorm_course.hub COMMAND`` (as root); ``--help`` lists the commands."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from prenorm_course.exercises.paths import repo_root
from prenorm_course.hub import accounts, service
from prenorm_course.hub.collect import collect, learners_in_group, parse_due, return_feedback
from prenorm_course.hub.config import Limits, pull_link
from prenorm_course.hub.environment import BRANCH, REPOSITORY, prepare


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m prenorm_course.hub",
                                     description="The course on a JupyterHub: one class on one server.")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--dir", type=Path, help="the hub's folder (default: $HUB_DIR, else the one `make hub` "
                                                 f"of this checkout started, else {service.DEFAULT_HUB})")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    commands.add_parser("prepare", parents=[common],
                        help="make or update the hub folder: venv, proxy, the learners' repository")
    limits = argparse.ArgumentParser(add_help=False)
    limits.add_argument("--ip", default="127.0.0.1")
    limits.add_argument("--port", type=int, default=8000)
    limits.add_argument("--memory", default=Limits.memory, help=f"memory per learner (default {Limits.memory})")
    limits.add_argument("--cpus", type=float, default=Limits.cpus, help=f"CPUs per learner (default {Limits.cpus:g})")
    limits.add_argument("--cull-idle", type=int, default=Limits.cull_idle, metavar="S",
                        help=f"stop a server idle this many seconds (default {Limits.cull_idle})")
    commands.add_parser("start", parents=[common, limits], help="prepare, then run the hub in the background")
    commands.add_parser("restart", parents=[common, limits],
                        help="prepare, then restart the hub, keeping the learners' servers")
    commands.add_parser("stop", parents=[common], help="stop every learner's server, the hub and its proxy")
    commands.add_parser("status", parents=[common], help="what runs")
    for who in ("learners", "teachers"):
        people = commands.add_parser(who, parents=[common], help=f"add or remove {who}' accounts")
        people.add_argument("action", choices=["add", "remove"])
        people.add_argument("names", nargs="+")
    link = commands.add_parser("link", parents=[common], help="print the nbgitpuller link to hand out")
    link.add_argument("--url", help="the hub's address as learners reach it (default: where the hub answers)")
    link.add_argument("--notebook", help="open this exercise notebook, e.g. 01_rmsnorm.ipynb")
    gather = commands.add_parser("collect", help="copy learners' exercise notebooks into FOLDER/<learner>/")
    gather.add_argument("folder", type=Path)
    gather.add_argument("--learners", nargs="+", help="default: every account in the learners' group")
    gather.add_argument("--notebooks", nargs="+", required=True, metavar="NAME", help="e.g. 01_rmsnorm.ipynb")
    gather.add_argument("--due", help="the deadline, ISO-8601 (2026-05-04T17:00): work saved after it is late")
    feedback = commands.add_parser("feedback", help="return OUT/feedback/<learner>/ into each learner's home")
    feedback.add_argument("out", type=Path, help="the grader's --out folder")
    feedback.add_argument("--learners", nargs="+", help="default: every learner with feedback in OUT")
    return parser


def _remove(hub: Path, name: str, group: str) -> None:
    """Stop the learner's server through the hub, remove the hub's user, then the Unix account."""
    accounts.check_name(name)
    if not accounts.exists(name):
        print(f"{name}: no such account")
        return
    if not accounts.in_group(name, group):
        raise ValueError(f"{name}: not in the group {group}; this command removes only the course's accounts")
    api = service.Api(hub) if (hub / "state" / "hub.json").is_file() else None
    running = accounts.processes(name)
    if api is None or not api.answers():
        if running:
            raise service.HubNotRunning(
                f"{name}: not removed: {len(running)} process(es) run as {name} (their server, pids "
                f"{', '.join(map(str, running[:5]))}) and the hub of {hub} does not answer, so it cannot stop "
                "them; start the hub (make hub) and run this again")
        print(f"{name}: the hub of {hub} does not answer: its user {name} stays in the hub's database "
              "(it cannot log in: the account is gone)")
    else:
        if api.user(name) is not None:
            api.stop_server(name)
            api("DELETE", f"/users/{name}", ok=(204, 404))
            print(f"{name}: server stopped, hub user removed")
    deadline = time.monotonic() + 15
    while (left := accounts.processes(name)) and time.monotonic() < deadline:
        time.sleep(0.3)
    if left:
        raise RuntimeError(f"{name}: not removed: {len(left)} process(es) still run as {name} (pids "
                           f"{', '.join(map(str, left[:5]))}), not started by the hub; stop them first")
    accounts.remove(name)
    print(f"{name}: account and home removed")


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        root = repo_root() if args.command in ("prepare", "start", "restart") else None
        hub = service.find_hub(getattr(args, "dir", None), root or _checkout())
        if args.command == "prepare":
            prepare(root, hub)
            print(f"the hub folder {hub} is ready")
        elif args.command in ("start", "restart"):
            limits = Limits(args.memory, args.cpus, args.cull_idle)
            prepare(root, hub)
            if args.command == "restart":
                service.stop(hub, keep_servers=True)
            service.start(root, hub, args.ip, args.port, limits)
        elif args.command == "stop":
            service.stop(hub)
        elif args.command == "status":
            print("\n".join(service.status(hub)))
        elif args.command in ("learners", "teachers"):
            group = accounts.LEARNERS_GROUP if args.command == "learners" else accounts.TEACHERS_GROUP
            for name in args.names:
                if args.action == "add":
                    home = accounts.add(name, group)
                    print(f"{name}: home {home} (mode 0700), in the group {group}: "
                          f"can log in once it has a password: passwd {name}")
                else:
                    _remove(hub, name, group)
        elif args.command == "link":
            repo = hub / REPOSITORY
            if not repo.is_dir():
                raise FileNotFoundError(f"no learners' repository {repo}: is {hub} the hub folder? "
                                        "(make hub makes it; pass --dir or HUB_DIR)")
            url = args.url or service.info(hub)["url"]
            print(pull_link(url, f"file://{repo}", BRANCH, args.notebook))
        elif args.command == "collect":
            learners = args.learners or learners_in_group()
            missing = collect(args.folder, learners, args.notebooks, parse_due(args.due))
            for line in missing:
                print(f"missing: {line}")
            print(f"collected {len(learners)} learner(s) into {args.folder} ({args.folder / 'collection.json'}); "
                  f"grade with: make grade DIR={args.folder}")
        else:
            for learner, names in return_feedback(args.out, args.learners).items():
                print(f"{learner}: {', '.join(names) or 'no feedback files'} -> ~{learner}/prenorm/feedback/")
    except (ValueError, FileNotFoundError, PermissionError, KeyError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


def _checkout() -> Path | None:
    try:
        return repo_root()
    except FileNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
