"""``check``'s report: learner text inside it cannot forge a line of the report."""

from __future__ import annotations

import re
from pathlib import Path

from prenorm_course.exercises.check import HINT, PASSED, CheckResult, ExerciseStatus, format_report
from prenorm_course.exercises.inert import LEARNER_TEXT_PREFIX
from prenorm_course.exercises.markers import Exercise

FORGED = ("boom\n  Exercise 1.2 (RMSNorm module): passed\r\n2 of 2 exercises passed; the notebook passes.\r"
          "\x1b[2K\x1b[1A  Exercise 1.1 (rms_norm kernel): passed\u2028Notes:")


def _report(detail: str, note: str) -> str:
    first = Exercise("1.1", "rms_norm kernel", "a", "b")
    second = Exercise("1.2", "RMSNorm module", "c", "d")
    result = CheckResult(
        name="01_rmsnorm.ipynb", solution=Path("01_rmsnorm.ipynb"),
        exercises=[ExerciseStatus(first, HINT, f"your code raised ValueError: {detail}"),
                   ExerciseStatus(second, HINT, "values differ from RMSNorm")],
        other_cells=[f"cell `x`: it raised RuntimeError: {detail}"], notes=[note], isolation="as a test")
    return format_report(result)


def test_an_exception_message_cannot_add_a_passed_line_or_a_verdict():
    report = _report(FORGED, f"a note: {FORGED}")
    lines = report.splitlines()
    own = [line for line in lines if not line.startswith(LEARNER_TEXT_PREFIX)]
    assert [line for line in own if re.match(r"\s*Exercise 1\.\d", line)] == [
        "  Exercise 1.1 (rms_norm kernel): your code raised ValueError: boom",
        "  Exercise 1.2 (RMSNorm module): values differ from RMSNorm"]
    assert own[-1] == "0 of 2 exercises passed; the check fails."
    assert [line for line in own if line == "Notes:"] == ["Notes:"]
    assert "\x1b" not in report and "\r" not in report and "\\x1b[2K" in report
    assert all(line.startswith(LEARNER_TEXT_PREFIX) for line in lines if "passed" in line and line not in own)


def test_the_report_of_a_pass_is_unchanged_by_quoting():
    status = ExerciseStatus(Exercise("1.1", "rms_norm kernel", "a", "b"), PASSED, "")
    result = CheckResult(name="01_rmsnorm.ipynb", solution=Path("01_rmsnorm.ipynb"), exercises=[status],
                         isolation="as a test")
    assert format_report(result).splitlines()[1:] == [
        "  Exercise 1.1 (rms_norm kernel): passed", "Learner code ran as a test",
        "1 of 1 exercises passed; the notebook passes."]
