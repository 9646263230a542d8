"""No renderer takes results as a dict: every public function of the presentation package
(`node/report/`) and of the API's shapes (`node/http/shapes.py`) takes the typed `CampaignReport` or a
typed part of it, never a `Mapping`/`dict` that it would have to validate again (issue 42).

Annotations are resolved with `typing.get_type_hints`, so an alias or a string annotation cannot hide
a dict; a parameter is refused if a `Mapping` or `dict` appears anywhere in its type. (`Any` is not
refused: matplotlib's figures and axes are untyped, and `shapes.strict` walks any JSON answer.)
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import typing
from collections.abc import Callable, Mapping
from types import ModuleType
from typing import Any, Final

import pytest
from rich.console import Group
from rich.table import Table

import node.report
from scheduler.results import CampaignReport, ReportTask

SHAPES: Final = "node.http.shapes"
TYPING_ONLY: Final = {"Group": Group, "Table": Table}
"""Names the renderers import under TYPE_CHECKING only (rich loads when a table is drawn)."""


def _modules() -> list[ModuleType]:
    names = [f"node.report.{m.name}" for m in pkgutil.iter_modules(node.report.__path__)]
    return [importlib.import_module(name) for name in [*names, SHAPES]]


def _public_functions() -> list[tuple[str, Callable[..., object]]]:
    found: list[tuple[str, Callable[..., object]]] = []
    for module in _modules():
        for name, value in vars(module).items():
            if not name.startswith("_") and inspect.isfunction(value) and value.__module__ == module.__name__:
                found.append((f"{module.__name__}.{name}", value))
    return found


def _untyped(hint: object) -> bool:
    """Whether a type is, or holds anywhere inside it, a Mapping or a dict."""
    origin = typing.get_origin(hint) or hint
    if inspect.isclass(origin) and issubclass(origin, Mapping):
        return True
    return any(_untyped(arg) for arg in typing.get_args(hint))


def _dict_parameters(function: Callable[..., object]) -> list[str]:
    hints = typing.get_type_hints(function, localns=TYPING_ONLY)
    hints.pop("return", None)
    return [name for name, hint in hints.items() if _untyped(hint)]


FUNCTIONS: Final = _public_functions()


def test_the_scan_sees_the_renderers() -> None:
    names = {name for name, _ in FUNCTIONS}
    assert {
        "node.report.render.render_html",
        "node.report.tables.render_markdown",
        f"{SHAPES}.result",
    } <= names
    assert len(names) >= 15


@pytest.mark.parametrize(("name", "function"), FUNCTIONS, ids=[n for n, _ in FUNCTIONS])
def test_no_renderer_takes_a_mapping_of_results(name: str, function: Callable[..., object]) -> None:
    assert _dict_parameters(function) == [], name


def test_the_whole_report_renderers_take_the_campaign_report() -> None:
    from node.report.render import render_html
    from node.report.tables import render_markdown

    for renderer in (render_html, render_markdown):
        assert typing.get_type_hints(renderer)["report"] is CampaignReport
    from node.http.shapes import result

    assert typing.get_type_hints(result)["task"] is ReportTask


def test_the_check_sees_a_mapping_however_it_is_spelt() -> None:
    def old(document: Mapping[str, Any], n: int) -> str:
        return ""

    def nested(rows: list[dict[str, str]] | None) -> str:
        return ""

    def typed(report: CampaignReport, part: ReportTask | None = None) -> str:
        return ""

    assert _dict_parameters(old) == ["document"]
    assert _dict_parameters(nested) == ["rows"]
    assert _dict_parameters(typed) == []
