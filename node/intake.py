"""The child side of validating a campaign posted over HTTP: parse it where a blow-up cannot hurt the node.

Run as ``python -m node.intake``: reads the campaign's text on stdin, validates it with
`scheduler.parse_campaign` under a memory and CPU limit, and writes one JSON object on stdout:
``{"campaign": {...}, "url_fields": {model key: field path}}`` when it is valid, else
``{"problems": [{"path": ..., "message": ...}]}``. YAML aliases can make a few hundred bytes expand
to billions of items ("billion laughs"); here that only costs this process, which the parent
(`node.http.vetting`) kills at its deadline. Imports stay light (no libp2p, no web stack) so that
the child starts fast.
"""

from __future__ import annotations

import json
import resource
import sys
from typing import Any, Final

import yaml

import scheduler as sch

MEMORY_BYTES: Final = 512 << 20
"""Address-space cap of the child: a valid campaign needs a few MiB, the interpreter about 60."""
CPU_S: Final = 15
"""CPU-time cap of the child (the parent's wall-clock deadline is usually hit first)."""


def vet(text: str) -> dict[str, Any]:
    """The child's answer for one campaign text (see the module docstring)."""
    try:
        campaign = sch.parse_campaign(text, source="request body")
    except sch.CampaignError as exc:
        return {"problems": [{"path": p.path, "message": p.problem} for p in exc.problems]}
    except ValueError as exc:  # urlsplit's ValueError escapes scheduler.sources for some URLs
        return {"problems": [{"path": "", "message": f"not a valid campaign: {exc}"}]}
    return {"campaign": campaign.model_dump(mode="json"), "url_fields": url_fields(text, campaign)}


def url_fields(text: str, campaign: sch.Campaign) -> dict[str, str]:
    """Where each model URL is written: ``model_url``, ``model.url`` or ``models[i].url``."""
    data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    fields: dict[str, str] = {}
    for index, source in enumerate(campaign.models):
        if "model_url" in data:
            fields[source.key] = "model_url"
        elif "model" in data:
            fields[source.key] = "model.url"
        else:
            fields[source.key] = f"models[{index}].url"
    return fields


def main() -> None:
    """Entry point of the child: limits, then stdin to stdout."""
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S))
    text = sys.stdin.buffer.read().decode("utf-8")
    sys.stdout.write(json.dumps(vet(text)))


if __name__ == "__main__":
    main()
