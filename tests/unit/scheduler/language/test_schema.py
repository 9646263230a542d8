"""The campaign file's JSON Schema says what the parser reads: the same fields, the short forms, the bounds.

The schema is written as models beside the hand-written parser (`scheduler.language.schema`), so these
tests tie the two: each block's fields are the parser's own list, every file in examples/ and every
short form the parser takes validates, and what the parser refuses for its shape the schema refuses
too. A schema generated and never checked would drift from the parser unseen.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from protocol import ComputeUnit
from scheduler import CampaignError, parse_campaign
from scheduler.language import (
    campaign,
    capacity,
    datablock,
    endpoints,
    generate,
    prices,
    requirements,
    sources,
    sustain,
    verify,
)
from scheduler.language.schema import campaign_schema

ROOT = Path(__file__).resolve().parents[4]
EXAMPLES = sorted((ROOT / "examples").glob("*.yaml"))
SCHEMA = campaign_schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _fields(definition: str) -> set[str]:
    node: dict[str, Any] = SCHEMA if definition == "" else SCHEMA["$defs"][definition]
    return set(node["properties"])


@pytest.mark.parametrize(
    ("definition", "parsed"),
    [
        ("", campaign._TOP_FIELDS),
        ("JobBlock", campaign._JOB_FIELDS),
        ("ModelBlock", sources._MODEL_FIELDS),
        ("RequireBlock", requirements._REQUIRE_FIELDS),
        ("VerifyBlock", verify._FIELDS),
        ("PriceBlock", prices._FIELDS),
        ("GenerateBlock", generate.GENERATE_FIELDS),
        ("CapacityBlock", capacity.CAPACITY_FIELDS),
        ("RateRange", capacity.RATE_FIELDS),
        ("SloBlock", capacity.SLO_FIELDS),
        ("DatasetBlock", (*datablock.DATASET_KINDS, "turns")),
        ("RandomBlock", datablock.RANDOM_FIELDS),
        ("SweepBlock", generate.SWEPT),
        ("InputLengths", ("mean", "stddev")),
        ("OutputLengths", ("mean", "stddev")),
        ("EndpointBlock", endpoints.ENDPOINT_FIELDS),
        ("FleetBlock", ("workers", "seed")),
        ("SustainBlock", sustain.SUSTAIN_FIELDS),
    ],
)
def test_each_block_has_the_fields_its_parser_reads(definition: str, parsed: tuple[str, ...]) -> None:
    assert _fields(definition) == set(parsed)


def test_the_schema_is_a_valid_draft_2020_12_schema_that_forbids_unknown_fields() -> None:
    jsonschema.Draft202012Validator.check_schema(SCHEMA)
    assert SCHEMA["additionalProperties"] is False
    assert all(
        node.get("additionalProperties") is False for node in SCHEMA["$defs"].values() if "properties" in node
    )
    assert SCHEMA["$defs"]["ComputeUnit"]["enum"] == [unit.value for unit in ComputeUnit]
    swept = set(SCHEMA["$defs"]["JobBlock"]["properties"]["sweep"]["propertyNames"]["enum"])
    assert swept == set(campaign._JOB_FIELDS) - {"sweep"}


def test_there_are_examples_to_validate() -> None:
    assert {p.name for p in EXAMPLES} >= {"campaign.yaml", "llm.yaml", "llm-endpoint.yaml", "runtimes.yaml"}


@pytest.mark.parametrize("path", EXAMPLES, ids=lambda p: p.name)
def test_every_example_validates_and_parses(path: Path) -> None:
    text = path.read_text()
    assert [error.message for error in VALIDATOR.iter_errors(yaml.safe_load(text))] == []
    parse_campaign(text, source=path.name)


def test_the_json_schema_the_cli_prints_is_plain_json() -> None:
    assert json.loads(json.dumps(SCHEMA)) == SCHEMA
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert "null" not in json.dumps(SCHEMA)  # a field left out is absent; no field takes null


MODEL = {"model": {"path": "m.onnx"}}
CPU = {"compute_unit": "CPU (ONNX)"}
SERVER = {"endpoint": {"url": "https://example.org/v1", "model": "m", "api_key_env": "KEY"}}
SHAREGPT = json.dumps([{"conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "yo"}]}])
FILES = {
    "in.npz": b"PK\x03\x04" + bytes(16),
    "x.npy": b"\x93NUMPY" + bytes(16),
    "chat.json": SHAREGPT.encode(),
}
SUMMARIES = {"prompts": "builtin:summaries", "max_new_tokens": 8}

# Short forms the parser takes, each a whole campaign: the schema must describe every one.
ACCEPTED: dict[str, dict[str, Any]] = {
    "the seeds' body": {"model_url": "https://example.org/m.onnx", "jobs": [CPU]},
    "models and a job naming one": {
        "models": [{"path": "a.onnx"}, {"url": "https://example.org/b.onnx", "key": "b"}],
        "jobs": [CPU | {"model": "b"}],
    },
    "os as one name": MODEL | {"jobs": [CPU | {"require": {"os": "Linux", "peers": ["12D3KooWx"]}}]},
    "one reference": MODEL | {"verify": {"replicas": 2, "reference": "owner-1a2b3c4d"}, "jobs": [CPU]},
    "devices any and a number": MODEL | {"jobs": [CPU | {"devices": "any"}, CPU | {"devices": 3}]},
    "a sweep": MODEL | {"jobs": [CPU | {"sweep": {"threads": [1, 2], "num_inference_runs": [10, 20]}}]},
    "input data as one .npz": MODEL | {"jobs": [CPU | {"input_data": "in.npz"}]},
    "input data per input": MODEL
    | {"jobs": [CPU | {"input_data": {"x": "x.npy"}, "input_shapes": {"y": [1, 4]}}]},
    "a sustained run": MODEL | {"jobs": [CPU | {"sustain": {"duration_s": 60, "window_s": 10}}]},
    "quality as one name": MODEL
    | {"jobs": [{"compute_unit": "CPU (PyTorch)", "generate": SUMMARIES, "quality": "rouge"}]},
    "a ShareGPT dataset": MODEL
    | {"jobs": [{"compute_unit": "CPU (PyTorch)", "generate": {"dataset": {"sharegpt": "chat.json"}}}]},
    "concurrency levels": {"jobs": [SERVER | {"generate": SUMMARIES | {"concurrency": [1, 4]}}]},
    "request rates": {
        "jobs": [SERVER | {"generate": SUMMARIES | {"request_rate": [0.5, 2], "duration_s": 5}}]
    },
    "a capacity search by rate": {
        "jobs": [
            SERVER
            | {"generate": SUMMARIES | {"capacity": {"slo": {"ttft_ms": 500}, "rate": {"min": 1, "max": 8}}}}
        ]
    },
    "a gray-box capacity search": {
        "jobs": [
            {
                "endpoint": {"model": "m"},
                "generate": SUMMARIES | {"slo": {"tpot_ms": 50}, "capacity": {"max_concurrency": 8}},
            }
        ]
    },
    "fleet: N": {
        "jobs": [SERVER | {"fleet": 4, "generate": SUMMARIES | {"request_rate": 2, "duration_s": 10}}]
    },
    "fleet: all": {
        "jobs": [SERVER | {"fleet": "all", "generate": SUMMARIES | {"concurrency": 2, "duration_s": 10}}]
    },
    "fleet as a mapping": {
        "jobs": [
            SERVER
            | {
                "fleet": {"workers": 2, "seed": 7},
                "generate": SUMMARIES | {"request_rate": 2, "duration_s": 10},
            }
        ]
    },
    "prices": MODEL
    | {
        "prices": [
            {"peer": "12D3KooWx", "per_hour": 2.5},
            {"class": "cls-1a2b3c4d" + "0" * 56, "per_hour": 1},
        ],
        "jobs": [CPU],
    },
}

# Shapes the parser refuses: the schema must refuse them too.
REFUSED: dict[str, dict[str, Any]] = {
    "no jobs": MODEL | {"jobs": []},
    "an unknown job field": MODEL | {"jobs": [CPU | {"num_inference_run": 3}]},
    "two model fields": MODEL | {"model_url": "https://example.org/m.onnx", "jobs": [CPU]},
    "a model with url and path": {
        "model": {"path": "m.onnx", "url": "https://example.org/m.onnx"},
        "jobs": [CPU],
    },
    "a job with a unit and an endpoint": {"jobs": [SERVER | CPU | {"generate": SUMMARIES}]},
    "an unknown unit": MODEL | {"jobs": [{"compute_unit": "TPU (ONNX)"}]},
    "a priority past 100": MODEL | {"priority": 101, "jobs": [CPU]},
    "replicas past the cap": MODEL | {"verify": {"replicas": 11}, "jobs": [CPU]},
    "an empty reference list": MODEL | {"verify": {"replicas": 2, "reference": []}, "jobs": [CPU]},
    "a price with peer and class": MODEL
    | {"prices": [{"peer": "a", "class": "cls-1a2b3c4d" + "0" * 56, "per_hour": 1}], "jobs": [CPU]},
    "a dataset of two kinds": MODEL
    | {
        "jobs": [
            {"compute_unit": "CPU (PyTorch)", "generate": {"dataset": {"sharegpt": "c.json", "random": {}}}}
        ]
    },
    "a capacity search with no range": {
        "jobs": [SERVER | {"generate": SUMMARIES | {"capacity": {"slo": {"ttft_ms": 500}}}}]
    },
    "fleet past its cap": {"jobs": [SERVER | {"fleet": 257, "generate": SUMMARIES | {"duration_s": 10}}]},
    "a sweep of an unknown field": MODEL | {"jobs": [CPU | {"sweep": {"colour": [1]}}]},
    "a sustain without its window": MODEL | {"jobs": [CPU | {"sustain": {"duration_s": 60}}]},
}


@pytest.mark.parametrize("name", ACCEPTED)
def test_a_short_form_the_parser_takes_validates(name: str) -> None:
    document = ACCEPTED[name]
    parse_campaign(json.dumps(document), files=FILES)
    assert [error.message for error in VALIDATOR.iter_errors(document)] == []


@pytest.mark.parametrize("name", REFUSED)
def test_a_shape_the_parser_refuses_the_schema_refuses(name: str) -> None:
    document = REFUSED[name]
    with pytest.raises(CampaignError):
        parse_campaign(json.dumps(document), files=FILES)
    assert not VALIDATOR.is_valid(document)


# The two corners where the schema is stricter than the parser (scheduler/language/schema.py says so).
STRICTER: dict[str, dict[str, Any]] = {
    "null for a field left out": MODEL | {"jobs": [CPU | {"threads": None}]},
    "a number YAML reads as text": {
        "jobs": [SERVER | {"generate": SUMMARIES | {"request_rate": "1e3", "duration_s": 1}}]
    },
}


@pytest.mark.parametrize("name", STRICTER)
def test_where_the_schema_is_stricter_than_the_parser(name: str) -> None:
    document = STRICTER[name]
    parse_campaign(json.dumps(document), files=FILES)
    assert not VALIDATOR.is_valid(document)
