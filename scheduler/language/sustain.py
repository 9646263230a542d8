"""A job's fields that change its built task spec: `input_data:` (pinned arrays) and `sustain:`.

    sustain: {duration_s: 600, window_s: 30}

A sustained job times runs in one process for `duration_s` and reports the median of every
`window_s` window (`protocol.windows`): its `processes` is 1 unless the job says otherwise (then it
is refused), and without its own `timeout_s` its timeout is the duration plus the default timeout.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from pydantic import ValidationError

from protocol import SustainSpec, TaskSpec
from scheduler.language.inputdata import parse_input_data
from scheduler.language.problems import Problems, describe

SUSTAIN_FIELDS: Final = ("duration_s", "window_s")


def extend_spec(
    spec: TaskSpec,
    fields: Mapping[str, object],
    paths: Mapping[str, str],
    files: Mapping[str, bytes],
    problems: Problems,
) -> TaskSpec | None:
    """The spec with the job's `input_data:` and `sustain:` applied, or None with the problems added."""
    if "input_data" in fields:
        fed = parse_input_data(fields["input_data"], paths["input_data"], files, problems)
        if fed is None:
            return None
        spec = spec.with_(input_data=fed)
    if "sustain" in fields:
        return _sustained(spec, fields, paths, problems)
    return spec


def _sustained(
    spec: TaskSpec, fields: Mapping[str, object], paths: Mapping[str, str], problems: Problems
) -> TaskSpec | None:
    raw, where = fields["sustain"], paths["sustain"]
    if not isinstance(raw, dict) or set(raw) != set(SUSTAIN_FIELDS):
        problems.add(where, f"expected {{duration_s: seconds, window_s: seconds}}, got {describe(raw)}")
        return None
    if "processes" in fields and fields["processes"] != 1:
        problems.add(paths["processes"], "a sustained job runs one process: leave processes out or set 1")
        return None
    if any(isinstance(v, bool) or not isinstance(v, int | float) for v in raw.values()):
        problems.add(where, f"duration_s and window_s are numbers of seconds, got {describe(raw)}")
        return None
    try:
        sustain = SustainSpec(duration_s=float(raw["duration_s"]), window_s=float(raw["window_s"]))
        values = spec.model_dump(exclude={"timeout_s"} if "timeout_s" not in fields else set())
        return TaskSpec.model_validate(values | {"processes": 1, "sustain": sustain})
    except ValidationError as exc:
        for error in exc.errors(include_url=False):
            problems.add(where, str(error["msg"]).removeprefix("Value error, "))
        return None
