"""Issue 52: a real campaign's bundle (tests/golden/bundle/, made by `python -m kit.bundlelab`) holds
as it was written, and every tampering of it is refused, naming its place.

Two cheaters. One edits the files after the fact without the submitter's key: the seal breaks, and
the place is named as well. The other is the submitter itself (it holds the key, tests/golden/
bundle/submitter.key, and seals its edits again): then the checks that rest on no seal refuse it,
each figure derived again from what the workers signed, each group's agreement recomputed.
"""

from __future__ import annotations

import base64
import copy
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from protocol import DOMAIN_BUNDLE, BundleSeal, seal
from scheduler.results.bundle import SignedPart, canonical, digest
from scheduler.results.proof import BundleError, Proof, check

GOLDEN = Path(__file__).resolve().parents[3] / "golden" / "bundle"
BUNDLE: dict[str, Any] = json.loads((GOLDEN / "bundle.json").read_text())
RESULTS: dict[str, Any] = json.loads((GOLDEN / "results.json").read_text())
KEY = (GOLDEN / "submitter.key").read_bytes()
OTHER_KEY = bytes(range(32))

Doc = dict[str, Any]


def judge(bundle: Doc, results: Doc, *, key: bytes | None = None) -> Proof:
    """`check` on the two documents as `submit` writes them; with `key`, sealed again by it."""
    results_text = json.dumps(results, indent=1).encode()
    if key is not None:
        body = bundle["body"]
        said = BundleSeal(
            campaign_id=body["campaign_id"],
            submitter=body["submitter"],
            results_sha256=digest(results_text),
            body_sha256=digest(canonical(body)),
            rows=len(body["rows"]),
        )
        bundle = {**bundle, "seal": SignedPart.of(seal(said, DOMAIN_BUNDLE, key)).model_dump(mode="json")}
    return check(json.dumps(bundle).encode(), results_text)


def test_the_golden_bundle_holds_as_written() -> None:
    assert json.dumps(RESULTS, indent=1).encode() == (GOLDEN / "results.json").read_bytes()
    proof = check((GOLDEN / "bundle.json").read_bytes(), (GOLDEN / "results.json").read_bytes())
    assert proof.holds, proof.problems
    assert (proof.rows, proof.groups) == (4, 2)
    assert any("not believed: challenge" in n for n in proof.notes)  # the claims with their evidence
    assert any(
        re.search(r"challenge of .*: CPU: [0-9.]+ GFLOPS measured, [0-9.]+ claimed", n) for n in proof.notes
    )


def _task(i: int) -> str:
    return str(RESULTS["results"][i]["row"]["JobId"])


def _flip(text: str, at: int | None = None) -> str:
    raw = bytearray(base64.b64decode(text))
    raw[len(raw) // 2 if at is None else at] ^= 0x01
    return base64.b64encode(bytes(raw)).decode()


Tamper = Callable[[Doc, Doc], None]


def _set(path: str, value: Any) -> Tamper:
    """Set a results.json field (`a.b.0.c`); a callable value maps the old one."""

    def tamper(_: Doc, results: Doc) -> None:
        *parents, last = path.split(".")
        node: Any = results
        for part in parents:
            node = node[int(part)] if isinstance(node, list) else node[part]
        key: Any = int(last) if isinstance(node, list) else last
        node[key] = value(node[key]) if callable(value) else value

    return tamper


def _body(change: Callable[[Doc], None]) -> Tamper:
    def tamper(bundle: Doc, _: Doc) -> None:
        change(bundle["body"])

    return tamper


def _swap_keys(body: Doc) -> None:
    rows = body["rows"]
    other = next(r for r in rows if r["result"]["peer_id"] != rows[0]["result"]["peer_id"])
    rows[0]["result"]["public_key"] = other["result"]["public_key"]


def _swap_envelopes(body: Doc) -> None:
    rows = body["rows"]
    rows[0]["result"], rows[1]["result"] = rows[1]["result"], rows[0]["result"]


def _widen_consistently(body: Doc) -> None:
    from scheduler.verification.agreement import band

    group = body["groups"][0]
    group["class_spread"] = 0.12
    group["band"] = band(0.12)


def _other_job_task(body: Doc) -> None:
    body["groups"][0]["tasks"][1] = body["groups"][1]["tasks"][0]


# (name, tamper, place named, sealed again by the submitter)
CASES: list[tuple[str, Tamper, str, bool]] = [
    (
        "a row's figure",
        _set("results.0.row.InferenceMsMedian", "0.100"),
        "results[0] (task {0}) row.InferenceMsMedian",
        False,
    ),
    (
        "a row's figure, resealed",
        _set("results.0.row.InferenceMsP99", "0.100"),
        "results[0] (task {0}) row.InferenceMsP99",
        True,
    ),
    (
        "a derived figure",
        _set("results.1.signed.measurement.inference_ms.median", lambda v: v * 0.5),
        "results[1] (task {1}) signed.measurement.inference_ms.median",
        True,
    ),
    (
        "a process median",
        _set("results.1.signed.measurement.process_medians_ms.0", lambda v: v * 0.9),
        "signed.measurement.process_medians_ms[0]",
        True,
    ),
    (
        "a sample",
        _set("results.2.samples_ms.3", lambda v: v + 0.001),
        "results[2] (task {2}) samples_ms",
        True,
    ),
    (
        "the worker of a row",
        _set("results.0.row.WorkerPeerId", "12D3KooWsomebodyElse"),
        "results[0] (task {0}) row.WorkerPeerId",
        True,
    ),
    (
        "a signed device",
        _set("results.3.signed.device.soc", "Apple M4 Max"),
        "results[3] (task {3}) signed.device.soc",
        True,
    ),
    ("a row dropped from results.json", lambda b, r: r["results"].pop(2), "rows[2] (task {2})", True),
    (
        "a row duplicated in results.json",
        lambda b, r: r["results"].append(copy.deepcopy(r["results"][0])),
        "results[4] (task {0})",
        True,
    ),
    (
        "an agreed figure in results.json",
        _set("verification.0.agreed_ms", lambda v: v * 0.7),
        "verification",
        True,
    ),
    ("a band widened in results.json", _set("verification.1.band", 0.5), "verification", True),
    (
        "a replica's figure in results.json",
        _set("verification.0.replicas.0.figure_ms", lambda v: v * 0.8),
        "figure_ms",
        True,
    ),
    ("the campaign as run", _set("campaign.jobs.1.spec.processes", 3), "processes", True),
    (
        "a signature",
        _body(lambda b: b["rows"][0]["result"].update(signature=_flip(b["rows"][0]["result"]["signature"]))),
        "rows[0] (task {0}) result",
        True,
    ),
    (
        "a raw part",
        _body(lambda b: b["rows"][1]["result"].update(payload=_flip(b["rows"][1]["result"]["payload"]))),
        "rows[1] (task {1}) result",
        True,
    ),
    ("a swapped key", _body(_swap_keys), "rows[0] (task {0}) result", True),
    ("two rows' signed results swapped", _body(_swap_envelopes), "rows[0] (task {0}) result.task_id", True),
    ("a signed result dropped", _body(lambda b: b["rows"].pop(3)), "results[3] (task {3})", True),
    (
        "a signed result duplicated",
        _body(lambda b: b["rows"].append(copy.deepcopy(b["rows"][0]))),
        "rows[4] (task {0})",
        True,
    ),
    ("a band widened", _body(lambda b: b["groups"][0].update(band=0.5)), "groups[0]", True),
    ("a band widened with its spread", _body(_widen_consistently), "class_spread", True),
    ("a group's agreed figure", _body(lambda b: b["groups"][1].update(figure_ms=1.0)), "groups[1]", True),
    ("a group's outcome", _body(lambda b: b["groups"][0].update(outcome="disagreed")), "outcome", True),
    ("a group's replica from another job", _body(_other_job_task), "groups[0]", True),
    (
        "a group's class",
        _body(lambda b: b["groups"][0].update(device_class="cls-00000000")),
        "device_class",
        True,
    ),
    (
        "a group's majority",
        _body(lambda b: b["groups"][0].update(agreed=b["groups"][0]["agreed"][:1])),
        "no strict majority",
        True,
    ),
    ("the body without the key", _body(lambda b: b["peers"][0].update(claim=[])), "bundle.json body", False),
    ("results.json without the key", _set("swarm", ["somewhere"]), "results.json: its bytes", False),
]


@pytest.mark.parametrize(("name", "tamper", "place", "resealed"), CASES, ids=[c[0] for c in CASES])
def test_each_tampering_is_refused_naming_its_place(
    name: str, tamper: Tamper, place: str, resealed: bool
) -> None:
    bundle, results = copy.deepcopy(BUNDLE), copy.deepcopy(RESULTS)
    tamper(bundle, results)
    proof = judge(bundle, results, key=KEY if resealed else None)
    assert not proof.holds, name
    wanted = place.format(*(_task(i) for i in range(4)))
    said = [str(p) for p in proof.problems]
    assert any(wanted in p for p in said), (wanted, said)
    if not resealed:
        assert any("seal" in p or "sealed" in p for p in said), said


def test_a_submitter_of_another_key_is_refused_on_every_row() -> None:
    bundle = copy.deepcopy(BUNDLE)
    from protocol import peer_id_from_public_key, public_key_of

    bundle["body"]["submitter"] = peer_id_from_public_key(public_key_of(OTHER_KEY))
    proof = judge(bundle, copy.deepcopy(RESULTS), key=OTHER_KEY)
    refused = {p.place for p in proof.problems if p.place.endswith("result.submitter")}
    assert len(refused) == 4, proof.problems


@pytest.mark.parametrize(
    ("bundle_text", "results_text", "said"),
    [
        (b"\xff not json", None, "bundle.json: parsing JSON"),
        (b"[]", None, "bundle.json: reading the bundle: not a JSON object"),
        (json.dumps({**BUNDLE, "format": "sark-bundle/9"}).encode(), None, "format 'sark-bundle/9'"),
        (
            json.dumps({**BUNDLE, "seal": {"peer_id": 1}}).encode(),
            None,
            "bundle.json: reading the bundle: seal",
        ),
        (None, b"{}", "results.json: reading the report"),
        (None, b"[" * 100_000, "results.json: reading the report"),
    ],
)
def test_a_file_that_is_no_bundle_is_named_with_its_stage(
    bundle_text: bytes | None, results_text: bytes | None, said: str
) -> None:
    with pytest.raises(BundleError) as caught:
        check(
            bundle_text or (GOLDEN / "bundle.json").read_bytes(),
            results_text or (GOLDEN / "results.json").read_bytes(),
        )
    assert said in str(caught.value)
