"""The output seams: hostile text is inert in CSV, on a terminal (plain and rich) and in Markdown."""

from __future__ import annotations

import csv
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table

from protocol.text import control_characters, for_csv, for_html, for_markdown, for_rich, is_number, visible

ESC, BEL, CSI, DEL = "\x1b", "\x07", "\x9b", "\x7f"
HOSTILE = f"{ESC}[2J{ESC}]8;;http://evil{BEL}click{ESC}]8;;{BEL} [bold red]x[/bold red] {CSI}31m{DEL}\u202eab"
FORBIDDEN = frozenset(chr(c) for c in [*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029, 0x202E, 0x2066])


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("plain name", "plain name"),
        (f"{ESC}[2J", "\\x1b[2J"),
        (f"a{BEL}b", "a\\x07b"),
        ("tab\there\nnew\rline", "tab\\x09here\\x0anew\\x0dline"),
        (f"{CSI}{DEL}\x85", "\\x9b\\x7f\\x85"),
        ("\u202eevil\u2066", "\\u202eevil\\u2066"),
        ("ünïcødé 名前 ✓", "ünïcødé 名前 ✓"),
    ],
)
def test_visible_writes_each_control_character_as_an_escape(text: str, shown: str) -> None:
    assert visible(text) == shown


@pytest.mark.parametrize(
    ("cell", "written"),
    [
        ('=HYPERLINK("http://evil","x")', '\'=HYPERLINK("http://evil","x")'),
        ("+cmd|' /C calc'!A0", "'+cmd|' /C calc'!A0"),
        ("-2+3", "'-2+3"),
        ("@SUM(A1)", "'@SUM(A1)"),
        ("\t=1", "'\\x09=1"),
        ("\r=1", "'\\x0d=1"),
        ("-1.5", "-1.5"),
        ("+3", "+3"),
        ("-2e-3", "-2e-3"),
        ("-inf", "'-inf"),
        ("12.0", "12.0"),
        ("", ""),
        ("Pixel 8 = fast", "Pixel 8 = fast"),
        (f"a{ESC}[31mb", "a\\x1b[31mb"),
        (f"={ESC}", "'=\\x1b"),
    ],
)
def test_csv_cells_never_start_a_formula_and_carry_no_control(cell: str, written: str) -> None:
    assert for_csv(cell) == written


@pytest.mark.parametrize(
    ("text", "written"),
    [
        ("a | b", "a \\| b"),
        ("`code`", "\\`code\\`"),
        ("# heading", "\\# heading"),
        ("<script>x</script>", "\\<script\\>x\\</script\\>"),
        ("[link](http://evil)", "\\[link\\](http://evil)"),
        ("![img](http://evil)", "\\!\\[img\\](http://evil)"),
        ("*b* _i_ ~s~ &amp;", "\\*b\\* \\_i\\_ \\~s\\~ \\&amp;"),
        ("no_feasible_peer", "no_feasible_peer"),
        (f"line{ESC}\nbreak", "line\\\\x1b\\\\x0abreak"),
    ],
)
def test_markdown_cells_escape_the_active_characters(text: str, written: str) -> None:
    assert for_markdown(text) == written


def _rendered(markup: str) -> str:
    """What a default rich Console (markup and emoji codes on) shows for `markup`."""
    console = Console(file=io.StringIO(), width=400, color_system=None)
    console.print(markup, soft_wrap=True, end="")
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert isinstance(out, str)
    return out


SHOWN_AS_TYPED = [
    "[bold red]x[/bold red]",
    "[link=http://evil]x[/link]",
    "\\[bold]x",
    "x\\",
    "x\\\\",
    "[/]",
    "[red]",
    "a [b] c",
    "\\[x",
    "\\\\[red]y",
    ":skull:",
    ":red_circle: down",
    "a:smile:b",
    ":warning-emoji: :thumbs_up-text:",
    ":SKULL:",
    "skull:",
    "12:30:00",
]
CONTEXTS = ["{}", "[dim]{}[/]", "peer:{}", "{}:x", ":{}:", "[bold]a:{}:b[/] c"]


@pytest.mark.parametrize("text", SHOWN_AS_TYPED)
@pytest.mark.parametrize("context", CONTEXTS)
def test_rich_shows_markup_and_emoji_codes_as_typed(text: str, context: str) -> None:
    shown = context.replace("[dim]", "").replace("[bold]", "").replace("[/]", "")
    assert _rendered(context.format(for_rich(text))) == shown.format(text)


def test_rich_table_cells_show_markup_and_emoji_codes_and_no_escape_byte() -> None:
    table = Table("device")
    table.add_row(for_rich(f"{HOSTILE} :skull:"))
    console = Console(file=io.StringIO(), width=400, color_system=None)
    console.print(table)
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "[bold red]x[/bold red]" in out
    assert ":skull:" in out
    assert not set(out) & FORBIDDEN - {"\n"}


def test_control_characters_lists_what_it_found() -> None:
    assert control_characters(f"ok{ESC}[2J{BEL}") == ["\\x1b", "\\x07"]
    assert control_characters("Pixel 8 Pro (arm64)") == []


@given(st.text())
def test_no_seam_lets_a_control_character_through(text: str) -> None:
    for seam in (visible, for_rich, for_csv, for_markdown, for_html):
        assert not set(seam(text)) & FORBIDDEN


@given(st.text())
def test_a_csv_cell_starts_a_formula_only_when_it_is_a_number(text: str) -> None:
    cell = for_csv(text)
    assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")) or is_number(cell)
    buffer = io.StringIO()
    csv.writer(buffer).writerow([cell])
    assert next(csv.reader(io.StringIO(buffer.getvalue()))) == [cell]  # one cell, one line


@given(st.text(), st.sampled_from(CONTEXTS))
def test_rich_renders_the_visible_text_unchanged(text: str, context: str) -> None:
    shown = context.replace("[dim]", "").replace("[bold]", "").replace("[/]", "")
    assert _rendered(context.format(for_rich(text))) == shown.format(visible(text))


@given(st.lists(st.sampled_from(["[", "]", "\\", ":", "skull", "red", "/", "b", "=", " ", "-emoji"])))
def test_rich_renders_its_active_characters_unchanged(parts: list[str]) -> None:
    text = "".join(parts)  # st.text() rarely builds `[red]` or `:skull:`: these pieces do
    for context in CONTEXTS:
        shown = context.replace("[dim]", "").replace("[bold]", "").replace("[/]", "")
        assert _rendered(context.format(for_rich(text))) == shown.format(text)
