"""A campaign file and the files it names, checked in a child before the submitter uses them.

`submit` and `plan` read a campaign's prompts, ShareGPT datasets, tokenizers and input data beside
it, and its local model files. Those bytes may be hostile (JSON nested 200,000 deep, a tokenizer
whose regex backtracks until the library panics, a 2,000,000-token vocabulary, random bytes named
`.onnx`), so they are parsed and inspected in ``python -m node.intake --folder DIR`` under its
address-space and CPU limits and `VET_DEADLINE_S` of wall time (see `node.intake`), never in the
submitter. The child starts isolated (`node.isolation`: ``-I``, an empty working directory, a scrubbed
environment), so no file beside the campaign can shadow a module it imports. The child hands back the
validated campaign; every problem it found, or its end at a limit, is a `CampaignError` naming the
field, the file and the cause (exit 2, nothing sent); a child that could not start at all is
`ChildNotStarted` (exit 1).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path
from typing import Final

import scheduler as sch
from node.errors import ChildNotStarted
from node.intake import LOCAL_CPU_S, LOCAL_MEMORY_BYTES
from node.isolation import child_env, module_argv, start_failure, started
from scheduler.language import DocumentError, load_document

VET_DEADLINE_S: Final = 120.0
"""Wall-clock limit of the child (a campaign with a 64 MB dataset and a large tokenizer takes seconds)."""
CHILD: Final = "node.intake"
"""The module the child runs (``--folder DIR SOURCE``)."""


def vet_local(text: str, source: Path) -> sch.Campaign:
    """The campaign in `text` (the file at `source`), validated with its files in a child.

    Raises:
        CampaignError: every problem, at its field; or the child's end at a limit, naming the files
            it was reading and the limit.
        ChildNotStarted: the child could not start (it never said so).
    """
    folder = source.parent.resolve()
    try:
        with tempfile.TemporaryDirectory(prefix="sark-intake-") as empty:
            done = subprocess.run(
                module_argv(CHILD, "--folder", str(folder), str(source)),
                input=text.encode(),
                capture_output=True,
                timeout=VET_DEADLINE_S,
                check=False,
                cwd=empty,
                env=child_env(),
            )
    except subprocess.TimeoutExpired:
        raise _stopped(text, source, f"it took more than {VET_DEADLINE_S:g} s (the limit)") from None
    began, rest = started(done.stdout)
    if not began:
        raise ChildNotStarted("checks the campaign's files", start_failure(done.returncode, done.stderr))
    kind, _, body = rest.partition(b"\n")
    if done.returncode != 0 or kind not in (b"campaign", b"problems"):
        why = (
            f"it needed more than {LOCAL_MEMORY_BYTES >> 20} MiB of memory or {LOCAL_CPU_S} s of CPU "
            f"(the limits; exit code {done.returncode})"
        )
        raise _stopped(text, source, why)
    if kind == b"problems":
        found = json.loads(body)
        raise sch.CampaignError(
            (sch.FieldProblem(p["path"], p["message"]) for p in found), source=str(source)
        )
    return sch.Campaign.model_validate_json(body)


def _stopped(text: str, source: Path, why: str) -> sch.CampaignError:
    """The problem for a child stopped at a limit: the files it was checking, and the limit."""
    names = [*sch.campaign_files(text), *_model_paths(text)]
    checked = ", ".join(names) if names else "the campaign file"
    return sch.CampaignError([sch.FieldProblem("", f"checking {checked} stopped: {why}")], source=str(source))


def _model_paths(text: str) -> list[str]:
    """The local model paths the text names, as written (best effort: the child did not finish)."""
    try:
        data = load_document(text)
    except DocumentError:
        return []
    if not isinstance(data, dict):
        return []
    listed = data.get("models")
    entries = [data.get("model"), *(listed if isinstance(listed, list) else [])]
    return [str(e["path"]) for e in entries if isinstance(e, dict) and isinstance(e.get("path"), str)]
