"""``python -m prenorm_lib.lab.figures``: regenerate every PNG in ``figures/``."""

import argparse

import torch

from prenorm_lib.lab.figures import write_all

parser = argparse.ArgumentParser(description=__doc__)
parser.add_argument("--out", default=None, help="folder to write into (default: ./figures)")
args = parser.parse_args()
torch.set_num_threads(1)
for path in write_all(args.out):
    print(f"wrote {path.name}")
