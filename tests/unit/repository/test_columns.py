"""One registry of output columns (`scheduler.results.columns`): no module outside the results room
defines a column.

A module defines a column when it writes a registered column name as a key of a dict display
(`{"InferenceMsMedian": ...}`), as a keyword of a call (`row.update(InferenceMsMedian=...)`), or as
one of two or more column names in a tuple, list or set display (a column list). Reading a cell by
its name (`row["Status"]`, `row.get("Detail")`) is not defining one. Tests are not scanned.
"""

from __future__ import annotations

import ast
from pathlib import Path

from scheduler.results import COLUMNS, CSV_COLUMNS, Section, cell, column_formulas

ROOT = Path(__file__).resolve().parents[3]
PACKAGES = ("node", "scheduler", "protocol", "drivers", "gate")
ROOM = ROOT / "scheduler" / "results"
NAMES = frozenset(CSV_COLUMNS)
NOT_A_ROW: dict[str, str] = {
    "node/http/shapes.py": "the seeds' /workers device_info object (Soc, Ram, DeviceOs...), not a result row",
}


def definitions(path: Path, names: frozenset[str] = NAMES) -> list[str]:
    """`line: name` for every column name the module defines (see the module docstring)."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Dict):
            keys = [k for k in node.keys if isinstance(k, ast.Constant)]
            found += [(node.lineno, k.value) for k in keys if k.value in names]
        elif isinstance(node, ast.Call):
            found += [(node.lineno, k.arg) for k in node.keywords if k.arg in names]
        elif isinstance(node, ast.Tuple | ast.List | ast.Set):
            listed = [e.value for e in node.elts if isinstance(e, ast.Constant) and e.value in names]
            found += [(node.lineno, n) for n in listed] if len(listed) >= 2 else []
    return [f"{line}: {name}" for line, name in sorted(found)]


def _outside_the_room() -> list[Path]:
    sources = (p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    return sorted(p for p in sources if ROOM not in p.parents and str(p.relative_to(ROOT)) not in NOT_A_ROW)


def test_no_module_outside_the_results_room_defines_a_column() -> None:
    found = {str(p.relative_to(ROOT)): d for p in _outside_the_room() if (d := definitions(p))}
    assert found == {}


def test_the_room_itself_defines_columns_so_the_scan_is_looking() -> None:
    assert definitions(ROOM / "rows.py")
    assert definitions(ROOM / "genrows.py")


def test_the_scan_sees_each_way_of_defining_a_column(tmp_path: Path) -> None:
    bad = tmp_path / "bad.py"
    bad.write_text(
        'a = {"Status": "x"}\nb = dict(JobId="y")\nc = ("FileName", "FileSize")\n'
        'd = row["Status"]\ne = row.get("Detail", "")\nf = ("Status", "elsewhere")\n'
    )
    assert definitions(bad) == ["1: Status", "2: JobId", "3: FileName", "3: FileSize"]


def test_the_registry_names_each_column_once_with_a_known_formula_and_a_form_that_writes() -> None:
    assert len(set(CSV_COLUMNS)) == len(CSV_COLUMNS)
    assert [c.section for c in COLUMNS] == sorted((c.section for c in COLUMNS), key=list(Section).index)
    assert set(column_formulas()) == {c.name for c in COLUMNS if c.formula}
    for column in COLUMNS:
        if column.form:
            sample = 3 if "d}" in column.form else 2.5
            assert cell(column.name, sample) != ""
    assert (cell("Unstable", True), cell("Fallback", False), cell("Detail", None)) == ("True", "False", "")


def test_one_boolean_spelling_in_every_golden_file() -> None:
    golden = sorted((ROOT / "tests" / "golden").glob("*/results.csv"))
    assert golden
    cells = {c for path in golden for line in path.read_text().splitlines() for c in line.split(",")}
    assert {"True", "False"} <= cells
    assert cells & {"true", "false"} == set()
