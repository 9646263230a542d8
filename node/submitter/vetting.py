"""The intake child's one launcher, and a campaign file checked in it before the submitter uses it.

`run_intake` starts ``python -m node.intake`` (see `node.intake`) isolated (`node.isolation`: ``-I``,
an empty working directory, a scrubbed environment, so no file beside the campaign can shadow a
module it imports), hands it the campaign's text, waits for it within a deadline (the child is killed
at the deadline or on cancel) and reads its one `Answer`; a child stopped at its deadline or at a
limit is `Stopped`, one that could not start at all `ChildNotStarted`. `serve` vets posted campaigns
with it (`node.http.vetting`); `submit` and `plan` with `vet_local`.

`submit` and `plan` read a campaign's prompts, ShareGPT datasets, tokenizers and input data beside
it, and its local model files. Those bytes may be hostile (JSON nested 200,000 deep, a tokenizer
whose regex backtracks until the library panics, a 2,000,000-token vocabulary, random bytes named
`.onnx`), so they are parsed and inspected in ``python -m node.intake --folder DIR SOURCE`` under its
address-space and CPU limits and `VET_DEADLINE_S` of wall time, never in the submitter. `vet_local`
hands back the validated campaign; every problem the child found, or its end at a limit, is a
`CampaignError` naming the field, the file and the cause (exit 2, nothing sent); a child that could
not start at all is `ChildNotStarted` (exit 1).
"""

from __future__ import annotations

import enum
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import trio
from pydantic import ValidationError

import scheduler as sch
from node.errors import ChildNotStarted
from node.intake import LOCAL_CPU_S, LOCAL_MEMORY_BYTES, POSTED_SOURCE, Answer
from node.isolation import child_env, module_argv, start_failure, started
from scheduler.language import DocumentError, load_document

VET_DEADLINE_S: Final = 120.0
"""Wall-clock limit of the child (a campaign with a 64 MB dataset and a large tokenizer takes seconds)."""
CHILD: Final = "node.intake"
"""The module the child runs."""


class Limit(enum.Enum):
    """Which limit stopped the intake child before it answered."""

    DEADLINE = "deadline"  # the caller's wall-clock deadline: the child was killed
    MEMORY_OR_CPU = "memory_or_cpu"  # its own address-space or CPU cap (a non-zero exit, no answer)


@dataclass(frozen=True)
class Stopped:
    """The intake child ended without an answer.

    Attributes:
        limit: which limit stopped it.
        returncode: its exit code (a signal's is negative); None when it was killed at the deadline.
    """

    limit: Limit
    returncode: int | None = None


async def run_intake(
    text: str, deadline_s: float, folder: Path | None = None, source: str = POSTED_SOURCE
) -> Answer | Stopped:
    """The intake child's answer for `text`, or how it stopped; with `folder` (a campaign file's,
    `source` naming the file) the child reads the files the campaign names there and checks its
    local models, under the larger `LOCAL_*` limits.

    Raises:
        ChildNotStarted: the child could not start (it never said so): a broken install.
    """
    args = () if folder is None else ("--folder", str(folder), source)
    with tempfile.TemporaryDirectory(prefix="sark-intake-") as empty:
        with trio.move_on_after(deadline_s):
            done = await trio.run_process(
                module_argv(CHILD, *args),
                stdin=text.encode(),
                capture_stdout=True,
                capture_stderr=True,
                check=False,
                cwd=empty,
                env=child_env(),
            )
            return _answer(done)
    return Stopped(Limit.DEADLINE)


def _answer(done: subprocess.CompletedProcess[bytes]) -> Answer | Stopped:
    """The answer a finished child wrote after its `STARTED` line, or `Stopped` at a limit."""
    began, rest = started(done.stdout)
    if not began:
        raise ChildNotStarted("checks the campaign's files", start_failure(done.returncode, done.stderr))
    if done.returncode != 0:
        return Stopped(Limit.MEMORY_OR_CPU, done.returncode)
    try:
        return Answer.model_validate_json(rest)
    except ValidationError:  # cut short: what it wrote is not a whole answer
        return Stopped(Limit.MEMORY_OR_CPU, done.returncode)


async def vet_local(text: str, source: Path) -> sch.Campaign:
    """The campaign in `text` (the file at `source`), validated with its files in the intake child.

    Raises:
        CampaignError: every problem, at its field; or the child's end at a limit, naming the files
            it was reading and the limit.
        ChildNotStarted: the child could not start (it never said so).
    """
    answer = await run_intake(text, VET_DEADLINE_S, source.parent.resolve(), str(source))
    if isinstance(answer, Stopped):
        raise _stopped(text, source, _why(answer))
    if answer.campaign is None:
        raise sch.CampaignError(answer.problems, source=str(source))
    return answer.campaign


def _why(stopped: Stopped) -> str:
    """The limit that stopped the child, in words."""
    if stopped.limit is Limit.DEADLINE:
        return f"it took more than {VET_DEADLINE_S:g} s (the limit)"
    return (
        f"it needed more than {LOCAL_MEMORY_BYTES >> 20} MiB of memory or {LOCAL_CPU_S} s of CPU "
        f"(the limits; exit code {stopped.returncode})"
    )


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
