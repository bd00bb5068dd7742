"""pytest plugin that records what nbval saw in each notebook cell.

It is copied as ``conftest.py`` next to the notebook under test (so the pytest
process never imports prenorm_lib or torch) and appends one JSON line per
cell to the file named by ``$PRENORM_NBVAL_REPORT``: the cell id, the
outcome, nbval's message and the exception the cell raised, if any. The
exercise tool maps these lines to exercises; pytest's text output is only
shown with ``--verbose``.
"""

import json
import os

import pytest

REPORT_ENV = "PRENORM_NBVAL_REPORT"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    cell = getattr(item, "cell", None)
    if cell is None or (call.when != "call" and call.excinfo is None):
        return
    errors = [
        {"ename": out.get("ename", ""), "evalue": out.get("evalue", "")}
        for out in (getattr(item, "test_outputs", None) or [])
        if out.get("output_type") == "error"
    ]
    record = {
        "cell_id": cell.get("id", ""),
        "cell_num": getattr(item, "cell_num", -1),
        "when": call.when,
        "outcome": report.outcome,
        "xfail": hasattr(report, "wasxfail"),
        "message": str(call.excinfo.value) if call.excinfo is not None else "",
        "errors": errors,
        "details": str(report.longrepr) if report.failed else "",
    }
    with open(os.environ[REPORT_ENV], "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
