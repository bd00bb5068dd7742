"""``python -m prenorm_course.handout`` (``make handout``): your notebooks' code in the CS336 handout's layout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from prenorm_course.handout import MODULE, ExportError, export, run_interface_tests

parser = argparse.ArgumentParser(prog="python -m prenorm_course.handout", description=__doc__)
parser.add_argument("--notebooks", type=Path, default=Path("notebooks/exercises"),
                    help="the folder of your exercise notebooks (default: notebooks/exercises)")
parser.add_argument("--out", type=Path, default=Path("handout"), help="where to write (default: handout/)")
parser.add_argument("--no-tests", action="store_true", help="write the files only; do not run the interface tests")
args = parser.parse_args()
try:
    done = export(args.notebooks, args.out)
except ExportError as problem:
    sys.exit(f"make handout: {problem}")
print(f"wrote {done.module}, {done.adapters} and {done.tests}")
if done.forbidden:
    print(f"{done.module.name} still calls what the handout asks you to write yourself (§1 allows from torch.nn only "
          "Parameter, the containers and init, nothing from torch.nn.functional; §3.5.4 asks for your own softmax):")
    for line in done.forbidden:
        print(f"  {line}")
    print("  replace each with your own kernel (my_silu, stable_softmax, ...), all in the same module")
print(f"""
In a clone of the handout's repository (github.com/stanford-cs336/assignment1-basics):
  cp {done.module} assignment1-basics/cs336_basics/{MODULE}.py
  cp {done.adapters} assignment1-basics/tests/adapters.py   # or copy only the run_* functions you need
  cd assignment1-basics && uv run pytest tests/test_model.py
""")
if not args.no_tests:
    print("the course's interface tests on the export:")
    sys.exit(run_interface_tests(args.out))
