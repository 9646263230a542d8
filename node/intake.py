"""The child side of validating a campaign: parse it where a blow-up cannot hurt the node.

Run as ``python -m node.intake``: reads the campaign's text on stdin, validates it with
`scheduler.parse_campaign` under a memory and CPU limit, and writes one JSON object on stdout:
``{"campaign": {...}, "url_fields": {model key: field path}}`` when it is valid, else
``{"problems": [{"path": ..., "message": ...}]}``. YAML aliases can make a few hundred bytes expand
to billions of items ("billion laughs"); here that only costs this process, which the parent
(`node.http.vetting`) kills at its deadline. Imports stay light (no libp2p, no web stack) so that
the child starts fast.

Run as ``python -m node.intake --folder DIR`` (`node.submitter.vetting`, for `submit` and `plan`): the
campaign file's own folder is DIR, so the child also reads the files the campaign names there
(prompts, ShareGPT datasets, tokenizers, input data: `node.campaignfiles`) and parses them, and
inspects each local model file as a worker's child would (`drivers.files.formats.check_model_file`: headers
and structure, never a runtime load). It writes ``campaign`` and the campaign's JSON on the next
line, or ``problems`` and the problems' JSON list.

Either way the child is started isolated (`node.isolation`: no working directory on its path, an
empty one to run in, a scrubbed environment) and first writes ``started`` on a line of its own, once
its imports and limits are in place.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path
from typing import Any, Final

import yaml

import scheduler as sch
from node.isolation import STARTED

MEMORY_BYTES: Final = 512 << 20
"""Address-space cap of the child: a valid campaign needs a few MiB, the interpreter about 60."""
CPU_S: Final = 15
"""CPU-time cap of the child (the parent's wall-clock deadline is usually hit first)."""
LOCAL_MEMORY_BYTES: Final = 3 << 30
"""Address-space cap with the campaign's files: up to 64 MiB each, parsed (JSON, a tokenizer's
vocabulary); a mapped model file's size is added while it is inspected."""
LOCAL_CPU_S: Final = 60
"""CPU-time cap with the campaign's files."""


def vet(text: str) -> dict[str, Any]:
    """The child's answer for one campaign text (see the module docstring)."""
    try:
        campaign = sch.parse_campaign(text, source="request body")
    except sch.CampaignError as exc:
        return {"problems": [{"path": p.path, "message": p.problem} for p in exc.problems]}
    except ValueError as exc:  # urlsplit's ValueError escapes scheduler.language.sources for some URLs
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


def vet_local(text: str, folder: Path, source: str) -> tuple[str, str]:
    """The child's answer for a campaign file and the files beside it: ("campaign", its JSON) or
    ("problems", their JSON list)."""
    from node.campaignfiles import read_prompt_files

    try:
        campaign = sch.parse_campaign(text, source=source, files=read_prompt_files(text, folder))
    except sch.CampaignError as exc:
        return "problems", json.dumps([{"path": p.path, "message": p.problem} for p in exc.problems])
    except ValueError as exc:
        return "problems", json.dumps([{"path": "", "message": f"not a valid campaign: {exc}"}])
    problems = [{"path": path, "message": why} for path, why in model_problems(campaign, folder)]
    if problems:
        return "problems", json.dumps(problems)
    return "campaign", campaign.model_dump_json()


def model_problems(campaign: sch.Campaign, folder: Path) -> list[tuple[str, str]]:
    """(field, why) for each local model file a worker's child would refuse at inspect.

    The same check the worker's child makes before any runtime sees the bytes (`check_model_file`):
    pickle sniffing, zip archive structure, the ONNX protobuf walked at the wire level (tensor bytes
    skipped), safetensors and GGUF headers against the file's size. Its cost is bounded by the
    headers and the protobuf's structure, not the weights; code models are let through (each
    worker's owner decides on those). A file that is not there is left to `pin_models`.
    """
    from drivers.errors import TaskFailed
    from drivers.files.formats import check_model_file
    from protocol import Stage

    problems = []
    for index, source in enumerate(campaign.models):
        if source.path is None:
            continue
        path = (folder / source.path).resolve()
        if not path.exists():
            continue
        field = "model.path" if len(campaign.models) == 1 else f"models[{index}].path"
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        size = path.stat().st_size if path.is_file() else 0
        if soft != resource.RLIM_INFINITY:  # the file is mapped: room for it
            raised = soft + size if hard == resource.RLIM_INFINITY else min(soft + size, hard)
            resource.setrlimit(resource.RLIMIT_AS, (raised, hard))
        try:
            check_model_file(path, source.format, allow_code_models=True)
        except TaskFailed as exc:
            detail = exc.located(path.name, Stage.INSPECT).detail
            problems.append((field, f"{detail} (refused here, before any worker is sent it)"))
        except MemoryError:
            problems.append(
                (field, f"{path.name}: inspect failed: its headers need more memory than allowed")
            )
        finally:
            resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    return problems


def _soft_limits(memory: int, cpu_s: int) -> None:
    """Soft address-space and CPU caps under the inherited hard ones (the hard address-space cap stays,
    so that inspecting a model may raise the soft one by the file's size); where the system refuses
    (macOS), the parent's wall-clock deadline still bounds the child."""
    for kind, cap in ((resource.RLIMIT_AS, memory), (resource.RLIMIT_CPU, cpu_s)):
        _soft, hard = resource.getrlimit(kind)
        try:
            resource.setrlimit(kind, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard))
        except (OSError, ValueError):
            continue


def _say_started() -> None:
    """Tell the parent this child imported its code and set its limits (`node.isolation.STARTED`)."""
    sys.stdout.buffer.write(STARTED + b"\n")
    sys.stdout.flush()


def main() -> None:
    """Entry point of the child: limits, the `STARTED` line, then stdin to stdout."""
    if sys.argv[1:2] == ["--folder"]:
        _soft_limits(LOCAL_MEMORY_BYTES, LOCAL_CPU_S)
        _say_started()
        text = sys.stdin.buffer.read().decode("utf-8")
        kind, body = vet_local(text, Path(sys.argv[2]), sys.argv[3])
        sys.stdout.write(f"{kind}\n{body}")
        return
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
    resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S))
    _say_started()
    text = sys.stdin.buffer.read().decode("utf-8")
    sys.stdout.write(json.dumps(vet(text)))


if __name__ == "__main__":
    main()
