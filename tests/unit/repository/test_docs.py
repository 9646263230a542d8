"""The documents are maps that stay true (issue 48): their size, their links, their commands.

- README.md is at most 300 lines and ARCHITECTURE.md at most 400: the detail lives in docs/ and in the
  package docstrings.
- Every relative link in README.md, ARCHITECTURE.md and docs/**/*.md (and the benchmarks' README and
  notes) resolves to a file of the repository, and a link with an anchor (`guide/fleet.md#addresses`)
  names a heading of that file (the anchor a Markdown renderer makes of it: lower case, punctuation
  out, spaces to hyphens).
- Every path a document writes in backticks under a top folder of the repository (`node/p2p/walk.py`,
  `tests/labs/faults`, `scheduler/results/report.entry_of`) is there: a file or folder, or a module and
  one of its names; outputs a command writes (`benchmarks/out/`, `examples/models/hub`) are not.
- The runnable-command rule. A line of a ```bash block in README.md or docs/ that starts with
  `sark-node`, `.venv/bin/sark-node`, `bash ` or `python` is a command a user runs as written, so a
  test runs it too. Each such line must be
    (a) found verbatim (without a trailing `# comment`) in some file under tests/, the test that runs
        it; or
    (b) in a block read by a test: the block's marker comment on the line before its fence
        (`<!-- runtimes-command -->`), named, together with the document's path (`README.md`,
        `docs/guide/campaigns.md`), by a file under tests/ or .ci/ that reads the block by its marker
        and runs or checks what it says (`.ci/run` runs README's test and binary commands so); or
    (c) marked as needing what this machine lacks, on the line before its fence:
        `<!-- needs: gpu -->` or `<!-- needs: macos -->`.
  A command with placeholders (`--gate ADDR`) that no test fills in is no line of a bash block: it
  goes in a table of command forms, where nobody copies it as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOCS = sorted((ROOT / "docs").rglob("*.md"))
BENCHMARKS = [ROOT / "benchmarks" / "README.md", *sorted((ROOT / "benchmarks" / "notes").glob("*.md"))]
MAPS = [ROOT / "README.md", ROOT / "ARCHITECTURE.md", *DOCS, *BENCHMARKS]
RUNNABLE = ("sark-node", ".venv/bin/sark-node", "bash ", "python")
NEEDS = ("<!-- needs: gpu -->", "<!-- needs: macos -->")
READERS = sorted(
    p
    for folder in ("tests", ".ci")
    for p in (ROOT / folder).rglob("*")
    if p.is_file() and "__pycache__" not in p.parts
)
"""Every file under tests/ and .ci/ but Python's caches: another xdist worker's assertion rewriter writes
`X.pyc.PID` there and renames it while this one collects (a fresh clone's run failed to collect on one)."""
LINK = re.compile(r"(?<!!)\[[^\]]*\]\(([^)\s]+)\)")
TICKED = re.compile(
    r"`((?:node|scheduler|protocol|drivers|gate|tests|benchmarks|docs|examples|\.ci)/[^`\s]*)`"
)
OUTPUTS = ("benchmarks/out", "examples/models/hub", "dist/", "build/")


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _readers() -> dict[Path, str]:
    """Every file a command could be run from, and its text (binary files left out)."""
    texts = {}
    for path in READERS:
        if path.name == Path(__file__).name:
            continue
        try:
            texts[path] = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError):  # binary, or a file some run removed since
            continue
    return texts


TEXTS = _readers()


def slug(heading: str) -> str:
    """The anchor a Markdown renderer makes of a heading (GitHub's rule)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    headings = [line.lstrip("#") for line in _prose(path.read_text()) if line.startswith("#")]
    return {slug(h.strip()) for h in headings}


def _prose(text: str) -> Iterator[str]:
    """The lines of a Markdown text outside its fenced code blocks."""
    fenced = False
    for line in text.splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield line


@dataclass(frozen=True)
class Command:
    """A runnable line of a bash block: its document, line number, marker (the line before the fence)."""

    doc: Path
    line: int
    text: str
    marker: str

    def __str__(self) -> str:
        return f"{_rel(self.doc)}:{self.line}: {self.text}"


def commands(doc: Path) -> Iterator[Command]:
    lines = doc.read_text().splitlines()
    fenced, bash, marker = False, False, ""
    for n, line in enumerate(lines, 1):
        fence = line.strip()
        if fence.startswith("```"):
            fenced, bash = not fenced, not fenced and fence == "```bash"
            before = lines[n - 2].strip() if n >= 2 else ""
            marker = before if bash and before.startswith("<!--") else ""
            continue
        if bash and line.startswith(RUNNABLE):
            yield Command(doc, n, re.sub(r"\s+#.*$", "", line).strip(), marker)


def _read_by_a_test(command: Command) -> bool:
    name = command.marker.removeprefix("<!--").removesuffix("-->").strip()
    return bool(name) and any(name in text and _rel(command.doc) in text for text in TEXTS.values())


def _found_verbatim(command: Command) -> bool:
    return any(command.text in text for text in TEXTS.values())


def test_readme_and_architecture_are_maps_not_manuals() -> None:
    assert len((ROOT / "README.md").read_text().splitlines()) <= 300
    assert len((ROOT / "ARCHITECTURE.md").read_text().splitlines()) <= 400


def test_there_are_docs_to_check() -> None:
    names = {_rel(p) for p in DOCS}
    assert {"docs/README.md", "docs/campaign.md", "docs/operators.md", "docs/guide/fleet.md"} <= names
    assert sum(1 for doc in [ROOT / "README.md", *DOCS] for _ in commands(doc)) >= 10


def broken_links(doc: Path) -> list[str]:
    """The relative links of a document that name no file, or no heading of the file they name."""
    broken = []
    for line in _prose(doc.read_text()):
        for target in LINK.findall(line):
            if re.match(r"[a-z][a-z0-9+.-]*:", target):
                continue  # another site: not ours to check
            path, _, anchor = target.partition("#")
            where = (doc.parent / path).resolve() if path else doc
            if not where.is_file():
                broken.append(f"{target}: no such file")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                broken.append(f"{target}: no heading #{anchor} in {where.name}")
    return broken


@pytest.mark.parametrize("doc", MAPS, ids=_rel)
def test_every_relative_link_resolves_with_its_anchor(doc: Path) -> None:
    assert broken_links(doc) == []


def _exists(path: str) -> bool:
    if path.startswith(OUTPUTS) or any(c in path for c in "*<>{}…"):
        return True
    plain = path.split("::")[0].rstrip("/.,:;")
    if (ROOT / plain).exists():
        return True
    module, _, _name = plain.rpartition(".")  # a module and one of its names: `node/submitter/run.start`
    return bool(module) and (ROOT / f"{module}.py").is_file()


@pytest.mark.parametrize("doc", MAPS, ids=_rel)
def test_every_repository_path_a_document_names_is_there(doc: Path) -> None:
    named = {path for line in doc.read_text().splitlines() for path in TICKED.findall(line)}
    assert sorted(path for path in named if not _exists(path)) == []


def test_the_link_and_path_checks_see_a_broken_one(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(
        "# A heading\n\n[ok](#a-heading) [gone](missing.md) [bad](doc.md#nowhere) [web](https://x.org)\n"
    )
    assert anchors(doc) == {"a-heading"}
    assert broken_links(doc) == ["missing.md: no such file", "doc.md#nowhere: no heading #nowhere in doc.md"]
    assert not _exists("node/p2p/nowhere.py")
    assert _exists("node/submitter/run.start")


@pytest.mark.parametrize("doc", [ROOT / "README.md", *DOCS], ids=_rel)
def test_every_runnable_command_is_run_by_a_test_or_marked(doc: Path) -> None:
    unrun = [
        str(command)
        for command in commands(doc)
        if command.marker not in NEEDS and not _read_by_a_test(command) and not _found_verbatim(command)
    ]
    assert unrun == []


def test_the_command_rule_sees_an_unrun_command(tmp_path: Path) -> None:
    doc = tmp_path / "guide.md"
    doc.write_text(
        "<!-- nobody-reads-this -->\n```bash\nsark-node frobnicate --now  # a comment\n```\n\n"
        "<!-- needs: gpu -->\n```bash\npython gpu_only.py\n```\n\n```text\nsark-node not-bash\n```\n"
    )
    found = list(commands(doc))
    assert [(c.text, c.marker) for c in found] == [
        ("sark-node frobnicate --now", "<!-- nobody-reads-this -->"),
        ("python gpu_only.py", "<!-- needs: gpu -->"),
    ]
    assert not _found_verbatim(found[0])
    assert found[1].marker in NEEDS
