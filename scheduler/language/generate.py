"""A job's ``generate:`` block and ``quality:`` list -> `GenerateSpec`, with every problem at its path.

Pure: a prompts file arrives as bytes in `files` (read by node/ beside the campaign file, keyed by the
name the campaign wrote); ``builtin:<set>`` needs no file.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Mapping
from typing import Final

import yaml
from pydantic import ValidationError

from protocol import GenerateSpec, Prompt, TaskSpec, TokenizerPin
from protocol.tokenizer import Pinned
from scheduler.language import prompts as prompt_sets
from scheduler.language.datablock import Made, dataset_files, made_dataset, tokenizer_of
from scheduler.language.endpoints import LOAD_FIELDS, load_levels
from scheduler.language.fleet import fleet_field
from scheduler.language.inputdata import input_data_files
from scheduler.language.problems import Problems, check_keys, describe, dig, unread

GENERATE_FIELDS: Final = (
    "prompts",
    "dataset",
    "tokenizer",
    "num_prompts",
    "max_new_tokens",
    "ignore_eos",
    "chat",
    "think_time_s",
    "sweep",
    *LOAD_FIELDS,
)
SWEPT: Final = ("input_tokens", "output_tokens")
MAX_SWEEP_POINTS: Final = 64
QUALITY_METRICS: Final = ("rouge",)
# A generate job loads a model of hundreds of MB: two loads (first and repeated) and one warm-up request.
GENERATE_DEFAULTS: Final[dict[str, int]] = {"load_runs": 2, "warmups": 1}


def generate_specs(
    spec: TaskSpec | None,
    fields: Mapping[str, object],
    path: str,
    files: Mapping[str, bytes],
    problems: Problems,
) -> list[TaskSpec]:
    """The job's task spec with its `generate:` block and `quality:`, one per load level, with a generate
    job's load and warm-up defaults; the spec alone when the job generates nothing."""
    if "generate" not in fields:
        if "quality" in fields:
            problems.add(f"{path}.quality", "quality metrics need a generate: block")
        return [] if spec is None else [spec]
    generated = parse_generate(fields["generate"], fields.get("quality"), path, files, problems)
    if "endpoint" not in fields and any(g.capacity is not None for g in generated):
        problems.add(f"{path}.generate.capacity", "a capacity search drives a model server: give an endpoint")
    fleet = fleet_field(fields, path, problems)
    generated = [g.with_(**fleet) for g in generated] if fleet is not None else generated
    if spec is None:
        return []
    defaults = {
        name: value
        for name, value in GENERATE_DEFAULTS.items()
        if {"load_runs": "load_runs", "warmups": "warmup_runs"}[name] not in fields
    }
    return [spec.with_(generate=g, **defaults) for g in generated]


def campaign_files(text: str) -> list[str]:
    """The files a campaign's jobs name, for node/ to read first: prompts files of generate jobs (not
    built-in sets), their tokenizers and dataset files (`scheduler.language.datablock`), and input data files
    (`scheduler.language.inputdata`)."""
    try:
        data = json.loads(text) if text.lstrip().startswith("{") else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError, RecursionError):
        return []  # parse_campaign reports it
    raw_jobs = data.get("jobs") if isinstance(data, dict) else None
    names: list[str] = []
    for job in raw_jobs if isinstance(raw_jobs, list) else []:
        block = job.get("generate") if isinstance(job, dict) else None
        source = block.get("prompts") if isinstance(block, dict) else None
        if (
            isinstance(source, str)
            and not source.startswith(prompt_sets.BUILTIN_PREFIX)
            and source not in names
        ):
            names.append(source)
        more = dataset_files(block) if isinstance(block, dict) else []
        names += [name for name in [*more, *input_data_files(job)] if name not in names]
    return names


def parse_generate(
    raw: object, quality: object, path: str, files: Mapping[str, bytes], problems: Problems
) -> list[GenerateSpec]:
    """The job's `GenerateSpec`s, one per load level, or none with its problems recorded
    (``jobs[0].generate.max_new_tokens``)."""
    where = f"{path}.generate"
    if not isinstance(raw, dict):
        problems.add(where, f"expected a mapping ({', '.join(GENERATE_FIELDS)}), got {describe(raw)}")
        return []
    before = len(problems.items)
    check_keys(raw, where, GENERATE_FIELDS, problems)
    count = raw.get("num_prompts")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        problems.add(f"{where}.num_prompts", f"expected a whole number from 1, got {describe(count)}")
        count = None
    pinned = tokenizer_of(raw, where, files, problems)
    points = _points(raw, where, problems)
    made = [(_made(_at(raw, point), where, files, pinned, count, problems), point) for point in points]
    metrics = _quality(quality, f"{path}.quality", problems)
    levels = load_levels(raw, where, problems)
    if any(m is None for m, _ in made) or not made or len(problems.items) > before:
        return []
    if not all(_sessions_fit(raw, m, where, problems) for m, _ in made if m is not None):
        return []
    fixed = {k: raw[k] for k in ("max_new_tokens", "ignore_eos", "chat", "think_time_s") if k in raw} | {
        "quality": metrics,
        "tokenizer": None if pinned is None else pinned[0],
    }
    specs: list[GenerateSpec] = []
    for one, point in made:
        assert one is not None
        fields = fixed | {
            "prompts": prompt_sets.take(one.prompts, count),
            "prompts_source": one.source,
            "prompts_sha256": one.digest,
            "dataset_seed": one.seed,
            "sweep_input_tokens": point.get("input_tokens"),
            "sweep_output_tokens": point.get("output_tokens"),
        }
        for level in levels:
            try:
                specs.append(GenerateSpec.model_validate(fields | level, strict=False))
            except ValidationError as exc:
                for error in exc.errors():
                    field = dig(error["loc"]).lstrip(".")
                    message = error["msg"].replace("Input should be", "must be")
                    problems.add(f"{where}.{field}", f"{message}, got {describe(error.get('input'))}")
    return specs if len(specs) == len(levels) * len(made) else []


def _points(raw: Mapping[str, object], where: str, problems: Problems) -> list[dict[str, int]]:
    """`sweep: {input_tokens: [...], output_tokens: [...]}`: one point per combination of the random
    dataset's mean lengths, in file order ([{}] without a sweep); each point a job per load level."""
    sweep = raw.get("sweep")
    if sweep is None:
        return [{}]
    dataset = raw.get("dataset")
    if not isinstance(dataset, dict) or "random" not in dataset:
        problems.add(f"{where}.sweep", "a sweep of lengths needs a random dataset (its lengths are exact)")
        return [{}]
    if not isinstance(sweep, dict) or not sweep or set(sweep) - set(SWEPT):
        problems.add(
            f"{where}.sweep",
            f"expected a mapping of {' and/or '.join(SWEPT)}: [lengths], got {describe(sweep)}",
        )
        return [{}]
    axes: list[list[tuple[str, int]]] = []
    for name, values in sweep.items():
        ok = (
            isinstance(values, list)
            and values
            and all(isinstance(v, int) and not isinstance(v, bool) and v >= 1 for v in values)
        )
        if not ok:
            problems.add(
                f"{where}.sweep.{name}", f"expected a list of token lengths from 1, got {describe(values)}"
            )
            return [{}]
        axes.append([(str(name), int(v)) for v in dict.fromkeys(values)])
    points = [dict(combo) for combo in itertools.product(*axes)]
    if len(points) > MAX_SWEEP_POINTS:
        problems.add(f"{where}.sweep", f"expands to {len(points)} points, at most {MAX_SWEEP_POINTS}")
        return [{}]
    return points


def _at(raw: Mapping[str, object], point: Mapping[str, int]) -> Mapping[str, object]:
    """The generate block with its random dataset's mean lengths set to a sweep's point."""
    if not point:
        return raw
    dataset = raw["dataset"]
    assert isinstance(dataset, dict)
    random = dict(dataset["random"]) if isinstance(dataset.get("random"), dict) else {}
    for name, mean in point.items():
        lengths = random.get(name)
        random[name] = (dict(lengths) if isinstance(lengths, dict) else {}) | {"mean": mean}
    return {**raw, "dataset": {**dataset, "random": random}}


def _sessions_fit(raw: Mapping[str, object], made: Made, where: str, problems: Problems) -> bool:
    """Sessions (a dataset's `turns:`) replay chat turns, one load at a time: refused beside `chat:
    false` (a completion has no turns to carry) and a capacity search (its levels judge requests)."""
    sessions = any(p.follow_ups for p in made.prompts)
    if not sessions:
        if "think_time_s" in raw:
            problems.add(f"{where}.think_time_s", "think time is between a session's turns: give turns:")
            return False
        return True
    if raw.get("chat") is False:
        problems.add(f"{where}.dataset.turns", "sessions replay chat turns: chat: false has none")
        return False
    if raw.get("capacity") is not None:
        problems.add(f"{where}.dataset.turns", "a capacity search with sessions is not done: give a load")
        return False
    return True


def _made(
    raw: Mapping[str, object],
    where: str,
    files: Mapping[str, bytes],
    pinned: tuple[TokenizerPin, Pinned] | None,
    count: int | None,
    problems: Problems,
) -> Made | None:
    """The block's prompts: its `dataset:` (`scheduler.language.datablock`) or its `prompts:` file or set."""
    if "dataset" not in raw:
        loaded = _prompts(raw.get("prompts"), f"{where}.prompts", files, problems)
        return None if loaded is None else Made(*loaded)
    if "prompts" in raw:
        problems.add(f"{where}.dataset", "give prompts or a dataset, not both")
        return None
    if pinned is None and raw.get("tokenizer") is not None:
        return None  # the tokenizer's problem is recorded; the dataset cannot be built without it
    vocabulary = None if pinned is None else pinned[1]
    return made_dataset(raw["dataset"], f"{where}.dataset", files, vocabulary, count, problems)


def _prompts(
    source: object, where: str, files: Mapping[str, bytes], problems: Problems
) -> tuple[tuple[Prompt, ...], str, str] | None:
    if not isinstance(source, str) or not source:
        problems.add(where, f"required: a JSONL file or builtin:summaries, got {describe(source)}")
        return None
    if source.startswith(prompt_sets.BUILTIN_PREFIX):
        name = source.removeprefix(prompt_sets.BUILTIN_PREFIX)
        try:
            prompts, digest = prompt_sets.builtin_prompts(name)
        except KeyError:
            problems.add(
                where, f"unknown built-in set {name!r}; known: {', '.join(prompt_sets.BUILTIN_SETS)}"
            )
            return None
        return prompts, digest, source
    if source not in files:
        problems.add(where, unread(files, source, f"cannot read prompts file {source!r}"))
        return None
    prompts, bad = prompt_sets.parse_jsonl(files[source], source)
    for problem in bad:
        problems.add(where, f"{source}: {problem}")
    return (prompts, prompt_sets.digest_bytes(files[source]), source) if not bad else None


def _quality(raw: object, where: str, problems: Problems) -> tuple[str, ...]:
    items = [] if raw is None else [raw] if isinstance(raw, str) else raw
    if not isinstance(items, list) or any(m not in QUALITY_METRICS for m in items):
        problems.add(
            where, f"expected a list of metrics from {', '.join(QUALITY_METRICS)}, got {describe(raw)}"
        )
        return ()
    return tuple(dict.fromkeys(str(m) for m in items))
