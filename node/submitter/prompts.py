"""The files a campaign's generate jobs name (prompts, tokenizers, datasets), read beside the campaign
file for the pure parser. A tokenizer given as a folder is read as its `tokenizer.json`."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import scheduler as sch
from protocol.tokenizer import FOLDER_FILE

MAX_PROMPTS_FILE: Final = 64 << 20  # MAX_PROMPTS x MAX_PROMPT_CHARS is about this much text


def read_prompt_files(text: str, folder: Path) -> dict[str, bytes]:
    """The bytes of each prompts file the campaign names, relative to its folder.

    A file that cannot be read (or is larger than `MAX_PROMPTS_FILE`) is left out: `parse_campaign`
    then reports it at its field path (``jobs[0].generate.prompts: cannot read prompts file ...``).
    """
    files: dict[str, bytes] = {}
    for name in sch.campaign_files(text):
        path = folder / name
        try:
            if path.is_dir():
                path = path / FOLDER_FILE
            if path.stat().st_size <= MAX_PROMPTS_FILE:
                files[name] = path.read_bytes()
        except OSError:
            continue
    return files
