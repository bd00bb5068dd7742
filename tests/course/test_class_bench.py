"""The class benchmark's and the kernel-memory run's tables, built from measured results.

``make class-bench`` (N learners through the hub's front door at once) and ``make kernel-memory``
(each notebook's kernel peak) are run by hand on a quiet machine (they take minutes and, at a
class's size, the machine); their figures go to docs/measurements.md. Here: the tables they
write say what was measured, failures and lost work are counted, and a bad N is refused.
"""

from __future__ import annotations

import pytest

from prenorm_course.hub import class_bench


def _result(spawn=None, notebook=None, failed=None, marker="m"):
    result = {}
    if spawn is not None:
        result["spawn"] = spawn
    if notebook is not None:
        result["notebook"] = notebook
    if failed:
        result["failed"] = failed
    elif marker:
        result["marker"] = marker
    return result


def test_the_class_table_counts_started_learners_failures_and_lost_work():
    results = {f"pnbench{i:03d}": _result(spawn=10.0 + i, notebook=20.0 + i) for i in range(9)}
    results["pnbench009"] = _result(failed="login and spawn: TimeoutError: the server had not started")
    measured = {"n": 10, "results": results, "memory": {name: 500.0 + i for i, name in enumerate(results)},
                "lost": ["pnbench003"], "wall": 60.0, "load_before": "load average 1.0, 0.5, 0.2",
                "load_after": "load average 9.0, 4.0, 1.0", "available_gib": 10.0, "stall": 0.21}
    table = class_bench.table([measured])
    row = table.splitlines()[-1]
    assert row.startswith("| 10 | 9 | 14.0 / 18.0 | 24.0 / 28.0 | 504 / 509 | 1 (login and spawn: TimeoutError: the "
                          "server had not started) |")
    # several failures: each stage named once, with its count and its first message
    two = dict(results, pnbench008=_result(failed="notebook 01: HTTPTimeoutError: Timeout during request"),
               pnbench007=_result(failed="notebook 01: RuntimeError: notebook 01 raised NameError: x"))
    row = class_bench.table([dict(measured, results=two)]).splitlines()[-1]
    assert ("| 3 (login and spawn: TimeoutError: the server had not started; notebook 01 ×2: RuntimeError: "
            "notebook 01 raised NameError: x) |") in row, row
    assert "| 1 | 21 % | 1.0 → 9.0 |" in row
    no_psi = dict(measured, stall=None, lost=[])
    assert "| 0 | – |" in class_bench.table([no_psi]).splitlines()[-1]


def test_percentiles_are_of_the_values_measured():
    values = [float(v) for v in range(1, 21)]
    assert class_bench.percentile(values, 50) == 10.0 and class_bench.percentile(values, 95) == 19.0
    assert class_bench.percentile([3.0], 95) == 3.0


def test_the_sizing_table_is_built_from_the_measured_peaks():
    peaks = {"01_rmsnorm.ipynb": (400.0, 7.0), "05_prenorm_vs_postnorm.ipynb": (900.0, 15.0)}
    table = class_bench.sizing(peaks, server_mb=150.0)
    assert "| 01_rmsnorm.ipynb | 400 | 7.0 |" in table
    assert "≥ 1.1 G (server 150 MB + heaviest kernel 900 MB)" in table
    assert "guarantee` 550M" in table and "`limit` 1050M" in table
    assert "01 fits 1 GB, 05 needs 2 GB" in table


def test_a_class_of_no_learners_is_refused(capsys):
    with pytest.raises(SystemExit):
        class_bench.main(["--learners", "0"])
    assert "--learners [0]: expected whole numbers of at least 1" in capsys.readouterr().err
