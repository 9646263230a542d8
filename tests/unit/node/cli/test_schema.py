"""`sark-node schema campaign`: the JSON Schema editors read, and `--markdown`, the committed reference.

The command runs in this process as the CLI registers it. docs/campaign.md is what `--markdown` prints
now, so the reference cannot go stale; the editor's command in docs/guide/campaigns.md (the line after
its `schema-command` marker) runs as written, and the schema it writes validates examples/campaign.yaml.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import jsonschema
import typer
import yaml
from typer.testing import CliRunner

import node.cli
from node.cli.schema import register
from scheduler.language import campaign_reference, campaign_schema

ROOT = Path(__file__).resolve().parents[4]
GUIDE = ROOT / "docs" / "guide" / "campaigns.md"


def _sark(*args: str) -> str:
    """`sark-node ARGS` in this process; its stdout."""
    app = typer.Typer()
    app.callback()(lambda: None)
    register(app)
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == 0, f"{args}: exit {result.exit_code}: {result.exception!r}\n{result.output}"
    return result.stdout


def test_the_cli_registers_the_schema_topic() -> None:
    assert "schema" in node.cli._TOPICS


def test_schema_campaign_prints_the_campaign_files_json_schema() -> None:
    printed = json.loads(_sark("schema", "campaign"))
    assert printed == campaign_schema()
    jsonschema.Draft202012Validator.check_schema(printed)


def test_the_committed_reference_is_what_markdown_prints_now() -> None:
    committed = (ROOT / "docs" / "campaign.md").read_text()
    assert _sark("schema", "campaign", "--markdown") == campaign_reference()
    assert committed == campaign_reference(), (
        "docs/campaign.md is stale: sark-node schema campaign --markdown > docs/campaign.md"
    )


def test_the_guides_editor_command_writes_a_schema_that_validates_the_example(tmp_path: Path) -> None:
    lines = GUIDE.read_text().splitlines()
    at = lines.index("<!-- schema-command -->")
    assert lines[at + 1] == "```bash"
    command = lines[at + 2]
    assert command == "sark-node schema campaign > campaign.schema.json"
    words = shlex.split(command)
    args, target = words[1 : words.index(">")], words[-1]
    (tmp_path / target).write_text(_sark(*args))
    schema = json.loads((tmp_path / target).read_text())
    example = yaml.safe_load((ROOT / "examples" / "campaign.yaml").read_text())
    jsonschema.Draft202012Validator(schema).validate(example)
