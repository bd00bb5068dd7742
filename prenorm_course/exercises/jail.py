"""Start a learner's kernel with limits, and, as root on Linux, without the power to touch anything.

Run as a script, not imported (it must start fast and import nothing from the course):
``python -I -S jail.py SPEC_JSON -- COMMAND...`` sets the limits in SPEC and then
replaces itself by COMMAND (the kernel), so the kernel keeps this process's id.

Three modes:

* ``strict`` (root on Linux): a private mount namespace in which

  - ``/tmp``, ``/var/tmp`` and ``/dev/shm`` are fresh, size-limited memory file systems:
    the kernel's working folder (a copy of the staging folder, made here) is the only
    place it can write, nothing it writes survives it, it cannot fill the disk, and it
    cannot see another submission's folder or connection key;
  - the folders given in ``hide`` (the submissions, the grade output) are covered by
    empty ones: it cannot read other learners' notebooks;
  - folders on the interpreter's path that an unprivileged user may not enter (a Python
    under ``/root``) are replaced by a covering folder that holds only that path;

  then it drops to ``uid`` (a fresh, unprivileged id per kernel: files owned by root or
  by the teacher are read-only to it, other kernels' processes are out of its reach)
  with ``no_new_privs`` set.
* ``user`` (root where namespaces are refused, e.g. an unprivileged container): the same
  drop to a fresh ``uid`` in the staging folder, which the grader made its own; no
  namespace, so it shares ``/tmp`` and may read what any user may read.
* ``plain`` (anyone else): only the resource limits. What that guarantees is said in
  :mod:`prenorm_course.exercises.sandbox`.

Resource limits (all modes): CPU seconds, address space, file size, open files, no
core files, and with a uid of its own the number of processes of that uid.
"""

import ctypes
import json
import os
import resource
import shutil
import stat
import sys

CLONE_NEWNS, CLONE_NEWIPC = 0x00020000, 0x08000000
MS_NOSUID, MS_NODEV, MS_BIND, MS_REC, MS_PRIVATE = 2, 4, 4096, 16384, 1 << 18
PR_SET_NO_NEW_PRIVS = 38

_libc = None


def _c():
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc


def _check(result, what):
    if result != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _mount(source, target, fstype, flags, data=None):
    def enc(text):
        return text.encode() if text is not None else None

    _check(_c().mount(enc(source), enc(target), enc(fstype), ctypes.c_ulong(flags), enc(data)), f"mount {target}")


def _tmpfs(target, size, mode="0755"):
    _mount("tmpfs", target, "tmpfs", MS_NOSUID | MS_NODEV, f"mode={mode},size={size}")


def _blocked_dirs(paths):
    """Folders on the way to ``paths`` that others may not enter, each with the children needed."""
    blocked = {}
    for path in paths:
        parts = os.path.realpath(path).split(os.sep)[1:]
        current = "/"
        for child in parts:
            if not child:
                continue
            if not os.stat(current).st_mode & stat.S_IXOTH:
                blocked.setdefault(current, set()).add(child)
            current = os.path.join(current, child)
    return blocked


def _expose(paths):
    """Make ``paths`` reachable for an unprivileged user without opening anything else."""
    blocked = _blocked_dirs(paths)
    for folder in sorted(blocked, key=lambda p: p.count(os.sep)):
        handles = {}
        for child in sorted(blocked[folder]):
            target = os.path.join(folder, child)
            if os.path.lexists(target):
                handles[child] = (os.open(target, os.O_PATH | os.O_NOFOLLOW), os.path.isdir(target))
        _tmpfs(folder, "1m")
        for child, (fd, is_dir) in handles.items():
            target = os.path.join(folder, child)
            if is_dir:
                os.mkdir(target)
            else:
                open(target, "w").close()
            _mount(f"/proc/self/fd/{fd}", target, None, MS_BIND | MS_REC)
            os.close(fd)


def _chown_tree(top, uid, gid):
    for folder, dirs, files in os.walk(top):
        os.chown(folder, uid, gid)
        for name in dirs + files:
            os.lchown(os.path.join(folder, name), uid, gid)


def _strict(spec):
    _check(_c().unshare(CLONE_NEWNS | CLONE_NEWIPC), "unshare")
    _mount(None, "/", None, MS_REC | MS_PRIVATE)
    stage = os.open(spec["stage"], os.O_PATH | os.O_DIRECTORY)
    _expose(spec["expose"])
    for folder in spec["hide"]:
        if os.path.isdir(folder):
            _tmpfs(folder, "4k", mode="0555")
    _tmpfs("/tmp", spec["tmp_bytes"], mode="1777")
    for folder in ("/var/tmp", "/dev/shm"):
        if os.path.isdir(folder) and not os.path.islink(folder):
            _tmpfs(folder, spec["tmp_bytes"], mode="1777")
    shutil.copytree(f"/proc/self/fd/{stage}", spec["workdir"], symlinks=True)
    os.close(stage)
    _chown_tree(spec["workdir"], spec["uid"], spec["uid"])
    os.chmod(spec["workdir"], 0o700)
    _drop_privileges(spec)


def _drop_privileges(spec):
    uid = gid = spec["uid"]
    resource.setrlimit(resource.RLIMIT_NPROC, (spec["nproc"], spec["nproc"]))
    os.setgroups([])
    os.setgid(gid)
    os.setuid(uid)
    if os.getuid() != uid or os.geteuid() != uid:
        raise OSError("could not drop privileges")
    _check(_c().prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "prctl(no_new_privs)")


def _limit(name, value):
    kind = getattr(resource, name)
    hard = resource.getrlimit(kind)[1]
    if hard != resource.RLIM_INFINITY:
        value = min(value, hard)
    resource.setrlimit(kind, (value, value if hard == resource.RLIM_INFINITY else hard))


def main(argv):
    spec = json.loads(argv[1])
    if argv[2] != "--" or len(argv) < 4:
        raise SystemExit("usage: jail.py SPEC -- COMMAND...")
    command = argv[3:]
    if spec["mode"] == "strict":
        _strict(spec)
    elif spec["mode"] == "user":
        _drop_privileges(spec)
    for name, value in spec["limits"].items():
        try:
            _limit(name, value)
        except (ValueError, OSError, AttributeError):  # e.g. macOS refuses some limits
            if spec["mode"] != "plain":
                raise
    os.chdir(spec["cwd"])
    os.execv(command[0], command)


if __name__ == "__main__":
    try:
        main(sys.argv)
    except OSError as exc:
        print(f"jail: {exc}", file=sys.stderr)
        sys.exit(97)
