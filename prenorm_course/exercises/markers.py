"""Exercise cells, their solution regions and their check cells (the course's conventions).

An exercise cell is a code cell whose first line is ``# Exercise N.M: title``;
it holds one or more regions between ``### BEGIN SOLUTION`` and
``### END SOLUTION``. The code cell after it, the check cell, imports a checker
module of ``prenorm_lib.checks`` and calls one checker on names the exercise cell
defines: ``check.rms_norm(my_rms_norm)``. Anything that breaks these rules is a
``NotebookError``: a marker that ``build`` silently skipped would ship a solution
to learners, and a check cell the grader cannot read could not be graded.

A region inside a function becomes ``# YOUR CODE HERE`` + ``raise
NotImplementedError(...)`` (raised only when the function is called); a region at
the top level of the cell becomes ``# YOUR CODE HERE`` + one ``name = ...`` line per
name it assigns, so that running the unfilled cell raises nothing and Run All goes on.

nbval's options come from the course cell only: its tags (``nbval-skip``,
``nbval-ignore-output``, ``raises-exception``) or, in older notebooks, its
``# NBVAL_...`` comment lines (``build`` turns those into tags in the exercise
notebooks, so learners never see them).
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

import nbformat

EXERCISE_RE = re.compile(r"^# Exercise (\d+\.\d+): (.+)$")
BEGIN = "### BEGIN SOLUTION"
END = "### END SOLUTION"
YOUR_CODE = "# YOUR CODE HERE"
NBVAL_MARKER_RE = re.compile(r"^\s*#\s*NBVAL_(\w+)\s*$")
VALUE_PLACEHOLDER_RE = re.compile(r"^\s*([A-Za-z_]\w*) = \.\.\.$")
CHECKS_PACKAGE = "prenorm_lib.checks"
# nbval's comment markers and the cell tags that mean the same
# A course cell that runs the learner's own classes (06 trains the learner's model): its output is the
# learner's, so the exercise notebook stores none and neither nbval nor the grader compares it.
USES_EXERCISES_TAG = "uses-exercises"
MARKER_TAGS = {"SKIP": "nbval-skip", "IGNORE_OUTPUT": "nbval-ignore-output", "RAISES_EXCEPTION": "raises-exception",
               "CHECK_OUTPUT": "nbval-check-output"}


class NotebookError(ValueError):
    """A solution or learner notebook that breaks the exercise conventions."""


@dataclass(frozen=True)
class Exercise:
    """One exercise: its id ``N.M``, title, and the ids of its two cells."""

    id: str
    title: str
    cell_id: str
    checker_cell_id: str

    @property
    def label(self) -> str:
        return f"Exercise {self.id} ({self.title})"


def id_key(exercise_id: str) -> tuple[int, int]:
    """Sort key so that 1.10 comes after 1.9."""
    major, minor = exercise_id.split(".")
    return int(major), int(minor)


def exercise_header(source: str) -> tuple[str, str] | None:
    """``(id, title)`` if ``source`` starts with an exercise header line, else None."""
    match = EXERCISE_RE.match(source.split("\n", 1)[0].rstrip())
    return (match.group(1), match.group(2).strip()) if match else None


def not_implemented_line(exercise_id: str, title: str) -> str:
    message = f"Exercise {exercise_id}: {title}"
    literal = f'"{message}"' if '"' not in message and "\\" not in message else repr(message)
    return f"raise NotImplementedError({literal})"


def _marker(line: str) -> str | None:
    stripped = line.strip()
    return stripped if stripped in (BEGIN, END) else None


def solution_regions(source: str, where: str) -> list[list[str]]:
    """The lines inside each BEGIN/END region, in order; checks that markers balance."""
    regions: list[list[str]] = []
    current: list[str] | None = None
    for number, line in enumerate(source.split("\n"), start=1):
        marker = _marker(line)
        if marker == BEGIN:
            if current is not None:
                raise NotebookError(f"{where}, line {number}: {BEGIN} inside another region")
            current = []
        elif marker == END:
            if current is None:
                raise NotebookError(f"{where}, line {number}: {END} without a {BEGIN}")
            regions.append(current)
            current = None
        elif current is not None:
            current.append(line)
    if current is not None:
        raise NotebookError(f"{where}: {BEGIN} is never closed by {END}")
    return regions


def _assigned_names(region: list[str]) -> list[str]:
    """Names a top-level region assigns, in order ([] if it is not only simple assignments)."""
    try:
        tree = ast.parse("\n".join(region))
    except SyntaxError:
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, ast.AnnAssign):
            targets = [node.target]
        else:
            return []
        if not all(isinstance(t, ast.Name) for t in targets):
            return []
        names += [t.id for t in targets if t.id not in names]
    return names


def scaffold_source(source: str, exercise_id: str, title: str) -> str:
    """Replace each solution region by ``# YOUR CODE HERE`` and a placeholder.

    Inside a function the placeholder raises ``NotImplementedError``; at the top level
    it assigns ``...`` to each name the region defines (running it raises nothing).
    """
    regions = solution_regions(source, f"Exercise {exercise_id}")  # validates the markers
    out: list[str] = []
    inside = False
    index = 0
    for line in source.split("\n"):
        marker = _marker(line)
        if marker == BEGIN:
            indent = line[: len(line) - len(line.lstrip())]
            names = _assigned_names(regions[index]) if not indent else []
            out.append(indent + YOUR_CODE)
            out += [f"{name} = ..." for name in names] or [indent + not_implemented_line(exercise_id, title)]
            inside = True
            index += 1
        elif marker == END:
            inside = False
        elif not inside:
            out.append(line)
    return "\n".join(out)


def _placeholder_length(lines: list[str], i: int) -> int:
    """How many lines the placeholder starting at line ``i`` has (0 if none starts there)."""
    if lines[i].strip() != YOUR_CODE or i + 1 >= len(lines):
        return 0
    if lines[i + 1].strip().startswith("raise NotImplementedError("):
        return 2
    n = 1
    while i + n < len(lines) and VALUE_PLACEHOLDER_RE.match(lines[i + n]):
        n += 1
    return n if n > 1 else 0


def has_placeholder(source: str) -> bool:
    """True if ``source`` still holds an unfilled placeholder of either kind."""
    lines = source.split("\n")
    return any(_placeholder_length(lines, i) for i in range(len(lines)))


def fill_scaffold(scaffold: str, regions: list[list[str]], exercise_id: str) -> str:
    """Put solution ``regions`` back in place of the scaffold's placeholders, in order.

    This is what a learner does by hand; ``verify`` uses it to prove that a
    correctly filled exercise notebook passes.
    """
    lines = scaffold.split("\n")
    out: list[str] = []
    filled = 0
    i = 0
    while i < len(lines):
        length = _placeholder_length(lines, i)
        if length:
            if filled == len(regions):
                raise NotebookError(f"Exercise {exercise_id}: more placeholders than solution regions")
            out += regions[filled]
            filled += 1
            i += length
        else:
            out.append(lines[i])
            i += 1
    if filled != len(regions):
        raise NotebookError(
            f"Exercise {exercise_id}: {len(regions)} solution regions but {filled} placeholders"
        )
    return "\n".join(out)


def strip_nbval_markers(source: str) -> str:
    """``source`` without ``# NBVAL_...`` comment lines (options live in the course cell's tags)."""
    return "\n".join(line for line in source.split("\n") if not NBVAL_MARKER_RE.match(line))


def course_options(cell: nbformat.NotebookNode) -> set[str]:
    """The nbval options of a course cell, as tags: its tags plus its ``# NBVAL_...`` comment lines."""
    tags = cell.get("metadata", {}).get("tags", [])
    options = {t for t in tags if isinstance(t, str)} if isinstance(tags, list) else set()
    for line in cell.get("source", "").split("\n"):
        match = NBVAL_MARKER_RE.match(line)
        if match and match.group(1) in MARKER_TAGS:
            options.add(MARKER_TAGS[match.group(1)])
    return options


def markers_to_tags(cell: nbformat.NotebookNode) -> None:
    """Move a cell's ``# NBVAL_...`` comment lines into its tags (in place; idempotent)."""
    if cell.cell_type != "code" or not any(NBVAL_MARKER_RE.match(line) for line in cell.source.split("\n")):
        return
    options = course_options(cell)
    tags = list(cell.metadata.get("tags", []))
    cell.metadata["tags"] = tags + sorted(options - set(tags))
    cell.source = strip_nbval_markers(cell.source)


def find_exercises(nb: nbformat.NotebookNode, name: str) -> list[Exercise]:
    """Every exercise of a solution (or exercise) notebook, with its checker cell.

    Raises NotebookError for a cell without an id, a duplicate exercise id, or
    an exercise not followed by a checker cell.
    """
    exercises: list[Exercise] = []
    seen: set[str] = set()
    cells = nb.cells
    for index, cell in enumerate(cells):
        if "id" not in cell:
            raise NotebookError(f"{name}: cell {index} has no id; save it with nbformat >= 4.5 (JupyterLab does)")
        header = exercise_header(cell.source) if cell.cell_type == "code" else None
        if header is None:
            continue
        exercise_id, title = header
        if exercise_id in seen:
            raise NotebookError(f"{name}: duplicate exercise id {exercise_id}")
        seen.add(exercise_id)
        checker = next((c for c in cells[index + 1 :] if c.cell_type == "code"), None)
        if checker is None or exercise_header(checker.source) is not None:
            raise NotebookError(f"{name}: Exercise {exercise_id} is not followed by a checker code cell")
        exercises.append(Exercise(exercise_id, title, cell.id, checker.id))
    return exercises


def check_calls(nb: nbformat.NotebookNode, exercises: list[Exercise], name: str) -> dict[str, CheckCall]:
    """Each exercise's check cell, read (``exercise id -> CheckCall``)."""
    sources = {cell.id: cell.source for cell in nb.cells if cell.cell_type == "code"}
    order = [cell.id for cell in nb.cells if cell.cell_type == "code"]
    calls = {}
    for exercise in exercises:
        earlier = [sources[i] for i in order[: order.index(exercise.checker_cell_id)]]
        calls[exercise.id] = check_call(earlier, sources[exercise.checker_cell_id], sources[exercise.cell_id],
                                        f"{name}, check cell of Exercise {exercise.id}")
    return calls


def validate_solution(nb: nbformat.NotebookNode, name: str, check_cells: bool = True) -> list[Exercise]:
    """``find_exercises`` plus the rules that only solution notebooks must meet (markers, check cells).

    ``check_cells=False`` leaves the check cells' Python unread (``check`` takes them from metadata).
    """
    exercises = find_exercises(nb, name)
    exercise_cells = {e.cell_id: e for e in exercises}
    for index, cell in enumerate(nb.cells):
        where = f"{name}, cell {index}"
        exercise = exercise_cells.get(cell.id)
        if exercise is None:
            if any(_marker(line) for line in cell.source.split("\n")):
                raise NotebookError(f"{where}: solution marker outside an exercise cell")
            continue
        if not solution_regions(cell.source, f"{where} (Exercise {exercise.id})"):
            raise NotebookError(f"{where}: Exercise {exercise.id} has no {BEGIN} region")
    if check_cells:
        check_calls(nb, exercises, name)
    return exercises


# --- check cells ---------------------------------------------------------------------------


METADATA_KEY = "prenorm"


@dataclass(frozen=True)
class CheckCall:
    """What a check cell asks: ``module.function(*args)``, and what the learner's kernel runs instead.

    ``args`` holds, per positional argument, the learner's name it passes (a name the
    exercise cell defines) or None for data the notebook computed (``runs`` in 4.3).
    ``kernel_source`` is the check cell without the checker call: in a graded run the
    learner's kernel executes only that (it may define names later cells use), and the
    grader calls the checker itself.
    """

    module: str
    function: str
    args: tuple[str | None, ...]
    kernel_source: str

    @property
    def learner_names(self) -> tuple[str, ...]:
        return tuple(a for a in self.args if a is not None)

    def metadata(self, exercise_id: str) -> dict:
        """What ``build`` writes into the check cell's metadata (``metadata.prenorm``; nbgrader's pattern)."""
        return {"exercise": exercise_id, "check": f"{self.module}.{self.function}", "args": list(self.args),
                "kernel_source": self.kernel_source}

    @classmethod
    def from_metadata(cls, data: object, exercise_id: str, where: str) -> CheckCall:
        """The check a cell's ``metadata.prenorm`` names; ``NotebookError`` if it is missing or malformed."""
        if not isinstance(data, dict):
            raise NotebookError(f"{where}: the check cell of Exercise {exercise_id} has no `{METADATA_KEY}` metadata "
                                "(which checker, on which names); rebuild the exercise notebooks with "
                                "`make exercises`")
        check, args, kernel_source = data.get("check"), data.get("args"), data.get("kernel_source")
        module, _, function = check.rpartition(".") if isinstance(check, str) else ("", "", "")
        if (data.get("exercise") != exercise_id or not module.startswith(CHECKS_PACKAGE + ".")
                or not function.isidentifier() or not isinstance(args, list) or not isinstance(kernel_source, str)
                or not all(a is None or (isinstance(a, str) and a.isidentifier()) for a in args)
                or not any(args)):
            raise NotebookError(f"{where}: the `{METADATA_KEY}` metadata of the check cell of Exercise {exercise_id} "
                                "is malformed; rebuild the exercise notebooks with `make exercises`")
        return cls(module, function, tuple(args), kernel_source)


def _checker_aliases(sources: list[str]) -> dict[str, str]:
    """``alias -> module`` for every import of a ``prenorm_lib.checks`` module in ``sources``."""
    aliases: dict[str, str] = {}
    for source in sources:
        try:
            tree = ast.parse(strip_nbval_markers(source))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == CHECKS_PACKAGE:
                for alias in node.names:
                    aliases[alias.asname or alias.name] = f"{CHECKS_PACKAGE}.{alias.name}"
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name.startswith(CHECKS_PACKAGE + ".") and alias.asname:
                        aliases[alias.asname] = alias.name
    return aliases


def defined_names(source: str) -> list[str]:
    """Names bound at the top level of a cell (functions, classes, assignments), in order."""
    try:
        tree = ast.parse(strip_nbval_markers(source))
    except SyntaxError:
        return []
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            found = [node.name]
        elif isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            found = [n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]
        else:
            found = []
        names += [n for n in found if n not in names]
    return names


def check_call(earlier_sources: list[str], check_source: str, exercise_source: str, where: str) -> CheckCall:
    """Read a course check cell; ``earlier_sources`` are the code cells before it (for its imports)."""
    aliases = _checker_aliases([*earlier_sources, check_source])
    try:
        tree = ast.parse(strip_nbval_markers(check_source))
    except SyntaxError as exc:
        raise NotebookError(f"{where}: the check cell does not parse ({exc.msg})") from None
    calls = [
        node for node in tree.body
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call)
        and isinstance(node.value.func, ast.Attribute) and isinstance(node.value.func.value, ast.Name)
        and node.value.func.value.id in aliases
    ]
    if len(calls) != 1 or calls[0].value.keywords:
        raise NotebookError(f"{where}: a check cell must call exactly one checker, as `check.<name>(arg, ...)` "
                            "with positional arguments, at its top level")
    call = calls[0]
    learner = set(defined_names(exercise_source))
    args = tuple(a.id if isinstance(a, ast.Name) and a.id in learner else None for a in call.value.args)
    if not any(args):
        raise NotebookError(f"{where}: the checker call passes nothing the exercise cell defines")
    if None in args:  # the grader takes only the learner's names from the kernel; it computes the rest itself
        raise NotebookError(f"{where}: argument {args.index(None) + 1} of the checker call is not a name the exercise "
                            "cell defines; a checker must compute what else it needs itself")
    lines = strip_nbval_markers(check_source).split("\n")
    kept = [line for number, line in enumerate(lines, start=1) if not call.lineno <= number <= call.end_lineno]
    kernel_source = "\n".join(kept) if any(
        line.strip() and not line.strip().startswith("#") for line in kept) else ""
    return CheckCall(aliases[call.value.func.value.id], call.value.func.attr, args, kernel_source)


def solution_literals(source: str) -> dict[str, object]:
    """The literal values a solution cell assigns (``prediction = {...}``); later assignments win.

    A name whose last assignment is not a literal maps to ``NotImplemented``.
    """
    values: dict[str, object] = {}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return values
    for node in tree.body:
        if isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Name):
                    try:
                        values[target.id] = ast.literal_eval(node.value)
                    except (ValueError, TypeError, SyntaxError, RecursionError):
                        values[target.id] = NotImplemented
    return values
