"""`sark-node owner new FILE`, `owner id FILE`: the owner key every device of one owner joins with.

A submitter counts all the devices of one owner as one vote in a quorum (`protocol.owner`): start each
of your workers with `join --owner-key FILE` (the same file), and name your owner id in a campaign's
`verify: {reference: [...]}` to trust every device of yours.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from node.cli.options import guard

owner_app = typer.Typer(
    name="owner",
    help="An owner key: one owner's devices are one vote in a quorum.",
    no_args_is_help=True,
    rich_markup_mode=None,
)

FileArg = Annotated[Path, typer.Argument(help="the owner key file (a 32-byte Ed25519 seed, mode 0600)")]


@owner_app.command(name="new")
def new(file: FileArg) -> None:
    """Mint an owner key in FILE (never over an existing file) and print its owner id."""
    from node.ownerkey import mint_owner_key

    print(guard(lambda: mint_owner_key(file)), flush=True)


@owner_app.command(name="id")
def show(file: FileArg) -> None:
    """Print the owner id of the key in FILE (what rows and `verify: {reference: [...]}` name)."""
    from node.ownerkey import owner_id_of

    print(guard(lambda: owner_id_of(file)), flush=True)


def register(app: typer.Typer) -> None:
    """Add `owner new` and `owner id` to the CLI."""
    app.add_typer(owner_app)
