"""`sark-node schema campaign`: the campaign file's JSON Schema, for editors; `--markdown`: its reference.

Both come from the campaign file's models (`scheduler.language.schema`): the schema is what an
editor's YAML language server checks campaign.yaml against, the Markdown is docs/campaign.md.
"""

from __future__ import annotations

from typing import Annotated

import typer

schema_app = typer.Typer(
    name="schema",
    help="The JSON Schema of a file sark-node reads.",
    no_args_is_help=True,
    rich_markup_mode=None,
)


@schema_app.command(name="campaign")
def campaign(
    markdown: Annotated[
        bool, typer.Option("--markdown", help="the campaign reference (docs/campaign.md) instead")
    ] = False,
) -> None:
    """Print the JSON Schema of a campaign file (campaign.yaml, or the seeds' JSON body)."""
    import json

    from scheduler.language import campaign_reference, campaign_schema

    text = campaign_reference() if markdown else json.dumps(campaign_schema(), indent=2) + "\n"
    typer.echo(text, nl=False)


def register(app: typer.Typer) -> None:
    """Add `schema campaign` to the CLI."""
    app.add_typer(schema_app)
