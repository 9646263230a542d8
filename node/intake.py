"""The child side of validating a campaign: parse it where a blow-up cannot hurt the node.

Run as ``python -m node.intake``: reads the campaign's text on stdin, validates it with
`scheduler.parse_campaign` under a memory and CPU limit, and writes its `Answer` on stdout. YAML
aliases can make a few hundred bytes expand to billions of items ("billion laughs"); here that only
costs this process, stopped at its CPU or memory cap. Imports stay light (no libp2p, no web
stack, no trio) so that the child starts fast.

Run as ``python -m node.intake --folder DIR SOURCE`` (for `submit` and `plan`): the campaign file's
own folder is DIR, so the child also reads the files the campaign names there (prompts, ShareGPT
datasets, tokenizers, input data: `node.campaignfiles`) and parses them, and inspects each local
model file as a worker's child would (`drivers.files.formats.check_model_file`: headers and
structure, never a runtime load), under the larger `LOCAL_*` limits.

Either way the child is started isolated (`node.isolation`: no working directory on its path, an
empty one to run in, a scrubbed environment) by the one launcher, `node.submitter.vetting.run_intake`
(for `submit`, `plan` and `serve` alike), first writes ``started`` on a line of its own, once its
imports and limits are in place, then one `Answer` as JSON.
"""

from __future__ import annotations

import json
import resource
import sys
from pathlib import Path
from typing import Final

import yaml
from pydantic import Field

import scheduler as sch
from node.isolation import STARTED
from protocol import Value

MEMORY_BYTES: Final = 512 << 20
"""Address-space cap of the child: a valid campaign needs a few MiB, the interpreter about 60."""
CPU_S: Final = 10
"""CPU-time cap of the child: what a posted campaign may cost (a valid one takes well under a second;
a YAML alias bomb is stopped here, SIGXCPU). CPU time, not wall time: on a busy machine a valid
campaign's child waits for a core, and a wall-clock cap refused it (`node.http.vetting`)."""
LOCAL_MEMORY_BYTES: Final = 3 << 30
"""Address-space cap with the campaign's files: up to 64 MiB each, parsed (JSON, a tokenizer's
vocabulary); a mapped model file's size is added while it is inspected."""
LOCAL_CPU_S: Final = 60
"""CPU-time cap with the campaign's files."""


POSTED_SOURCE: Final = "request body"
"""Where a campaign read without a folder came from, as its problems name it (`serve`'s API)."""


class Answer(Value):
    """What the child hands back: the campaign when it is valid, else every problem at its field.

    Attributes:
        campaign: the validated campaign; None when a problem was found.
        url_fields: model key to the field its URL is written in (``model_url``, ``models[1].url``).
        problems: what is wrong, each at its field; empty when the campaign is valid.
    """

    campaign: sch.Campaign | None = None
    url_fields: dict[str, str] = Field(default_factory=dict)
    problems: tuple[sch.FieldProblem, ...] = ()


def vet(text: str, source: str = POSTED_SOURCE, folder: Path | None = None) -> Answer:
    """The child's answer for one campaign text; with `folder`, the files it names there are read
    for the parser and its local model files inspected."""
    try:
        campaign = sch.parse_campaign(text, source=source, files=_files(text, folder))
    except sch.CampaignError as exc:
        return Answer(problems=exc.problems)
    except ValueError as exc:  # urlsplit's ValueError escapes scheduler.language.sources for some URLs
        return Answer(problems=(sch.FieldProblem("", f"not a valid campaign: {exc}"),))
    if folder is not None:
        problems = tuple(sch.FieldProblem(path, why) for path, why in model_problems(campaign, folder))
        if problems:
            return Answer(problems=problems)
    return Answer(campaign=campaign, url_fields=url_fields(text, campaign))


def _files(text: str, folder: Path | None) -> sch.CampaignFiles | None:
    """The bytes of the files the campaign names in `folder` (`node.campaignfiles`); None without one."""
    if folder is None:
        return None
    from node.campaignfiles import read_prompt_files  # only a campaign file's child reads its folder

    return read_prompt_files(text, folder)


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
    """Entry point of the child: limits, the `STARTED` line, then stdin to its `Answer` on stdout."""
    local = sys.argv[1:2] == ["--folder"]
    if local:
        _soft_limits(LOCAL_MEMORY_BYTES, LOCAL_CPU_S)
    else:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BYTES, MEMORY_BYTES))
        resource.setrlimit(resource.RLIMIT_CPU, (CPU_S, CPU_S))
    _say_started()
    text = sys.stdin.buffer.read().decode("utf-8")
    answer = vet(text, sys.argv[3], Path(sys.argv[2])) if local else vet(text)
    sys.stdout.write(answer.model_dump_json())


if __name__ == "__main__":
    main()
