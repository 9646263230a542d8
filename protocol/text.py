"""Text that a peer or a campaign wrote, made inert for the medium it leaves through.

A device name, a profile field, a failure detail or a model name is data in every medium: it is
neutralised once, where it leaves, by the function for that medium, never by ad-hoc escaping at
each print. Pure: strings in, strings out.

- `visible`: control characters (C0 with tab and newline, DEL, C1, the Unicode line separators and
  bidirectional overrides) become visible escapes such as `\\x1b`; for plain terminal lines.
- `for_rich`: `visible`, then made inert for rich markup: `[bold red]` is shown and never applied,
  and an emoji code such as `:skull:` is shown as typed, never replaced by an emoji. Rich has no escape
  for emoji codes, so the text is cut with empty spans (`[none][/none]`, markup that renders nothing)
  after each `[` and `:`; what the user sees is exactly the text, with no hidden character.
- `for_csv`: `visible`, and a cell that is not a number and starts with `=`, `+`, `-`, `@`, tab or
  CR is prefixed with `'` (OWASP's CSV injection advice), so no spreadsheet runs it as a formula.
- `for_markdown`: `visible`, then Markdown's active characters backslash-escaped (a table cell
  stays one cell; no link, image, HTML tag, code span or heading comes from the text).

- `for_html`: `visible`, then HTML-escaped (report.html); the dashboard sets `textContent` only.
"""

from __future__ import annotations

import html
import re
from typing import Final

_CONTROL: Final = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u200e\u200f\u202a-\u202e\u2066-\u2069]")
"""What a terminal, a spreadsheet or a viewer acts on instead of showing: C0, DEL, C1, U+2028/9, bidi."""

FORMULA_START: Final = ("=", "+", "-", "@", "\t", "\r")
_NUMBER: Final = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_CUT: Final = "[none][/none]"
"""An empty rich span. It renders nothing, and it ends rich's plain run: no tag starts at a `[` just
before it and no emoji code (`:name:`, replaced within one run) spans it."""
_RICH_ACTIVE: Final = re.compile(r"\[|:|\\+\Z")
_EMOJI_EDGE: Final = re.compile(r"\S*:|\S+\Z")  # the text's first word could close a `:` before it
_MARKDOWN: Final = re.compile(
    r"[\\`*\[\]<>|#~&!$]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])"
)  # "a_b" is no emphasis


def control_characters(text: str) -> list[str]:
    """The control characters in `text`, as `visible` writes them (empty: none)."""
    return [_escape(m) for m in _CONTROL.finditer(text)]


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` with every control character written as a visible escape (ESC -> `\\x1b`)."""
    return _CONTROL.sub(_escape, text)


def for_rich(text: str) -> str:
    """`text` for a rich markup string or table cell: controls visible, markup and emoji codes shown as typed.

    Rich reads `\\[` as `[` in plain text, and a tag's leading backslashes in pairs: every `[` becomes
    `\\[` followed by a cut (no tag can start there), every `:` is followed by a cut (no two colons
    share a run), and trailing backslashes are doubled before a cut, so a tag our markup puts after
    the text is not escaped by them. A first word that could close an emoji code opened by the text
    before it (`peer:` then `skull:`) starts with a cut.
    """

    def inert(match: re.Match[str]) -> str:
        active = match.group()
        if active == "[":
            return "\\[" + _CUT
        return (active if active == ":" else active * 2) + _CUT

    shown = visible(text)
    lead = _CUT if _EMOJI_EDGE.match(shown) else ""
    return lead + _RICH_ACTIVE.sub(inert, shown)


def is_number(text: str) -> bool:
    """True for a plain decimal number such as `-1.5` or `2e-3` (what a spreadsheet reads as a number)."""
    return _NUMBER.fullmatch(text) is not None


def for_csv(cell: str) -> str:
    """One CSV cell: a would-be formula prefixed with `'`, control characters visible."""
    if cell.startswith(FORMULA_START) and not is_number(cell):
        cell = "'" + cell
    return visible(cell)


def for_markdown(text: str) -> str:
    """Text for a Markdown table cell or heading: controls visible, Markdown's active characters escaped."""
    return _MARKDOWN.sub(lambda m: "\\" + m.group(), visible(text))


def for_html(text: str) -> str:
    """Text for an HTML element or attribute: controls visible, `<`, `>`, `&` and quotes escaped."""
    return html.escape(visible(text))
