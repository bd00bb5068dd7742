"""Which installed packages a graded kernel can import: the few it needs, and nothing else.

The course's environment holds more than a kernel needs: Hugging Face's ``transformers``
(the reference the tests and ``make bench`` check the block against) has its own RMSNorm,
SiLU, rotary embedding, attention and decoder layer -- the answers to most exercises,
under names no lint looks for. Withholding them from ``prenorm_lib`` alone would leave
them one import away. So inside the sandbox every ``site-packages`` (or Debian
``dist-packages``) folder the interpreter could reach is an empty read-only memory folder,
and the environment's own shows only the distributions in ``KERNEL_PACKAGES`` and what
they require (``kernel_distributions``), each bound in read-only (``site_binds``).

``KERNEL_PACKAGES`` is the kernel (``ipykernel``, ``ipywidgets``), the seccomp filter
its launcher installs, and the library's own dependencies (a test holds them equal to
``pyproject.toml``'s); the Gradescope zip installs exactly these and what the grader
needs beside them (``GRADER_PACKAGES``), since there, without bubblewrap, nothing can be
hidden. ``packaging`` reads the requirements (a dependency of the Jupyter stack, so
always present): no hand-written parser of markers.
"""

from __future__ import annotations

import functools
import importlib.metadata
import re
import sys
import sysconfig
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement

LIBRARY_PACKAGES = ("torch", "numpy", "matplotlib", "tqdm", "scipy")  # pyproject.toml's dependencies
KERNEL_PACKAGES = ("ipykernel", "ipywidgets", "pyseccomp", *LIBRARY_PACKAGES)
GRADER_PACKAGES = (*KERNEL_PACKAGES, "nbformat", "nbclient", "pillow")  # pillow: pinned for the figures' bytes


def normalised(name: str) -> str:
    """A distribution's name as PEP 503 compares them (``Jupyter_Client`` and ``jupyter-client`` are one)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def site_dirs() -> list[Path]:
    """Every folder of installed packages the interpreter could be pointed at: the environment's,
    the base installation's, and the system's (``/usr``, ``/usr/local``)."""
    prefixes = {Path(sys.prefix), Path(sys.base_prefix), Path(sys.exec_prefix), Path("/usr"), Path("/usr/local")}
    found = {Path(sysconfig.get_paths()[key]) for key in ("purelib", "platlib")}
    for prefix in prefixes:
        found.update(prefix.glob("lib*/python3*/site-packages"))
        found.update(prefix.glob("lib*/python3*/dist-packages"))
        found.update(prefix.glob("lib*/python3/dist-packages"))
    return sorted({path.resolve() for path in found if path.is_dir()})


def _requirement_names(requirements: list[str] | None) -> list[str]:
    names = []
    for text in requirements or []:
        try:
            requirement = Requirement(text)
        except InvalidRequirement:
            continue
        if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
            names.append(normalised(requirement.name))
    return names


@functools.cache
def kernel_distributions(site: Path) -> dict[str, importlib.metadata.Distribution]:
    """The distributions installed in ``site`` that a kernel needs: ``KERNEL_PACKAGES`` and what they require
    (extras left out), by normalised name. A needed package that is not installed is simply absent here:
    the kernel then fails to start with Python's own ImportError, as it would outside the sandbox."""
    installed = {normalised(d.metadata["Name"] or ""): d for d in importlib.metadata.distributions(path=[str(site)])}
    needed: dict[str, importlib.metadata.Distribution] = {}
    todo = [normalised(name) for name in KERNEL_PACKAGES]
    while todo:
        name = todo.pop()
        if name in needed or name not in installed:
            continue
        needed[name] = installed[name]
        todo += _requirement_names(installed[name].requires)
    return needed


def shown_entries(site: Path) -> list[str]:
    """The top-level names in ``site`` that belong to a needed distribution (packages, modules, their
    metadata folders, their ``.pth`` files). ``__pycache__`` and ``..`` (scripts) are left out."""
    entries: set[str] = set()
    for dist in kernel_distributions(site).values():
        for file in dist.files or []:
            top = Path(file).parts[0] if Path(file).parts else ""
            if top and top not in ("..", "__pycache__") and (site / top).exists():
                entries.add(top)
    return sorted(entries)


def site_binds() -> list[str]:
    """bubblewrap arguments: each folder of installed packages becomes an empty read-only memory folder,
    and the environment's own shows the needed distributions again, bound in read-only. They must come
    after the binds of the interpreter and its environment, which they cover."""
    own = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}
    args: list[str] = []
    for site in site_dirs():
        args += ["--perms", "0755", "--tmpfs", str(site)]
        if site in own:
            for entry in shown_entries(site):
                args += ["--ro-bind", str(site / entry), str(site / entry)]
        args += ["--remount-ro", str(site)]
    return args
