"""The files a campaign's generate jobs name (prompts, tokenizers, datasets), read beside the campaign
file for the pure parser. A tokenizer given as a folder is read as its `tokenizer.json`."""

from __future__ import annotations

from pathlib import Path
from typing import Final

import scheduler as sch
from node.errors import megabytes
from protocol.generation import MAX_PROMPTS
from protocol.tokenizer import FOLDER_FILE

MAX_PROMPTS_FILE: Final = 64 << 20  # MAX_PROMPTS x MAX_PROMPT_CHARS is about this much text


def read_prompt_files(text: str, folder: Path) -> sch.CampaignFiles:
    """The bytes of each file the campaign names, relative to its folder.

    A file that cannot be read, or is larger than `MAX_PROMPTS_FILE`, is left out with the reason
    (its size and the limit): `parse_campaign` reports it at its field path
    (``jobs[0].generate.dataset.sharegpt: big.json: 70 MB, over the limit of 67 MB ...``).
    """
    found: dict[str, bytes] = {}
    refused: dict[str, str] = {}
    for name in sch.campaign_files(text):
        path = folder / name
        try:
            if path.is_dir():
                path = path / FOLDER_FILE
            size = path.stat().st_size
            if size > MAX_PROMPTS_FILE:
                refused[name] = (
                    f"{megabytes(size)} ({size} bytes), over the limit of {megabytes(MAX_PROMPTS_FILE)} "
                    f"({MAX_PROMPTS_FILE} bytes) for a file a campaign names; at most {MAX_PROMPTS} "
                    "prompts are used, so a file of those is enough"
                )
                continue
            found[name] = path.read_bytes()
        except OSError:
            continue  # the parser's own "cannot read ... file" names it
    return sch.CampaignFiles(found, refused)
