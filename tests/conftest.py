"""Shared test set-up: one torch thread, the same seed for every test, quick hypothesis.

- One thread: the tensors here are tiny, and on a busy two-core machine OpenMP's
  hand-off between two threads costs milliseconds per matmul (the suite ran 30× slower).
- Hypothesis runs a few dozen examples per property, derandomised, with no deadline: the
  first call of a torch op can take far longer than the rest, which is not a failure of
  the code under test.
"""

from __future__ import annotations

import pytest
import torch
from hypothesis import settings

torch.set_num_threads(1)
settings.register_profile("prenorm", max_examples=30, deadline=None, derandomize=True)
settings.load_profile("prenorm")


@pytest.fixture(autouse=True)
def _seed_torch():
    """Seed torch's generator before each test so a failure reproduces exactly."""
    torch.manual_seed(0)

