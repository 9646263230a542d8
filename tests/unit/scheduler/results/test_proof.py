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
import dataclasses
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


def _at(suffix: str) -> int:
    """The index in results.json of the entry whose task id ends with `suffix`."""
    (i,) = (i for i, t in enumerate(RESULTS["results"]) if t["row"]["JobId"].endswith(suffix))
    return i


def _row(suffix: str) -> int:
    """The index in bundle.json's rows of the signed result whose task id ends with `suffix`."""
    (i,) = (i for i, r in enumerate(BUNDLE["body"]["rows"]) if r["task_id"].endswith(suffix))
    return i


SEARCH, FLEET = "-job-2-0", "-job-3-fleet"
MEMBERS = ("-job-3-0", "-job-3-1")


def test_the_golden_bundle_holds_as_written() -> None:
    assert json.dumps(RESULTS, indent=1).encode() == (GOLDEN / "results.json").read_bytes()
    proof = check((GOLDEN / "bundle.json").read_bytes(), (GOLDEN / "results.json").read_bytes())
    assert proof.holds, proof.problems
    assert (proof.rows, proof.derived, proof.groups) == (7, 5, 2)  # a search's 4 levels, a fleet's row
    assert any(  # each peer's challenge with its evidence (whether its claim was borne out varies by run)
        re.search(r"challenge of .*: CPU: [0-9.]+ GFLOPS measured, [0-9.]+ claimed", n) for n in proof.notes
    )
    search = RESULTS["results"][_at(SEARCH)]
    levels = [t for t in RESULTS["results"] if t["row"]["CapacityRow"] == "level"]
    assert search["row"]["CapacityRow"] == "knee"
    assert search["row"]["CapacityKnee"]
    assert len(levels) == len(search["signed"]["measurement"]["capacity"]["levels"]) >= 3
    assert {t["row"]["LevelPassed"] for t in levels} == {"True", "False"}  # a knee between two verdicts
    merged = RESULTS["results"][_at(FLEET)]["row"]
    assert merged["Detail"] == "merged from the raw records of 2 of 2 members"
    assert int(merged["Requests"]) == sum(int(RESULTS["results"][_at(m)]["row"]["Requests"]) for m in MEMBERS)


def test_a_bundle_that_kept_each_whole_offer_spec_still_holds() -> None:
    """Bundles written before the schedule alone was kept hold each load's whole offer spec
    (`offered`): read as they are, each schedule checked as before."""
    bundle = copy.deepcopy(BUNDLE)
    jobs = RESULTS["campaign"]["jobs"]
    moved = 0
    for row in bundle["body"]["rows"]:
        schedule = row.pop("schedule", None)
        if schedule is not None:
            spec = copy.deepcopy(jobs[row["job_index"]]["spec"])
            spec["generate"].update(schedule)
            row["offered"], moved = spec, moved + 1
    assert moved == len(MEMBERS)
    proof = judge(bundle, copy.deepcopy(RESULTS), key=KEY)
    assert proof.holds, proof.problems
    assert (proof.rows, proof.derived) == (7, 5)


def _witnessed(rises: dict[str, float], floor_ms: float | None = None) -> tuple[Doc, Doc]:
    """The golden bundle with each fleet member's row carrying what the submitter saw of the server
    (`ServerWitness`): the counters' rise, the first member's claims counted before the second's."""
    bundle, results = copy.deepcopy(BUNDLE), copy.deepcopy(RESULTS)
    before = 0
    for suffix in MEMBERS:
        requests = int(results["results"][_at(suffix)]["row"]["Requests"])
        bundle["body"]["rows"][_row(suffix)]["server"] = {
            "floor_ms": floor_ms,
            "floor_said": "0.5 x the shortest first token of the submitter's own probe" if floor_ms else "",
            "metrics_url": "http://127.0.0.1:8000/metrics",
            "rises": rises,
            "counters": {q: f"vllm:{q}_total" for q in rises},
            "before": {"requests": before} if "requests" in rises else {},
        }
        before += requests
    return bundle, results


def test_a_loads_records_are_held_to_what_the_submitter_saw_of_its_server() -> None:
    """Issue 50: the server's count and floor, the submitter's own view when it accepted a result,
    travel with the row; a reader holds the signed records to them as the submitter did. A submitter
    that seals a result its own view refused (the members claim more requests than the server
    counted, or first tokens faster than the floor it measured) is named, even sealed."""
    total = sum(int(RESULTS["results"][_at(m)]["row"]["Requests"]) for m in MEMBERS)
    assert total > 2
    proof = judge(*_witnessed({"requests": float(total)}, floor_ms=0.001), key=KEY)
    assert proof.holds, proof.problems
    assert any(n.startswith("2 load result(s) held to what the submitter saw") for n in proof.notes)
    proof = judge(*_witnessed({"requests": 1.0}), key=KEY)
    said = [str(p) for p in proof.problems]
    assert any(
        "result.measurement" in p and "more than the server counted: vllm:requests_total rose by 1" in p
        for p in said
    ), said
    proof = judge(*_witnessed({}, floor_ms=1e6), key=KEY)
    said = [str(p) for p in proof.problems]
    assert any("result.measurement" in p and "0.5 x the shortest first token" in p for p in said), said


def test_a_refused_claim_is_shown_with_its_evidence_and_refuses_nothing() -> None:
    bundle = copy.deepcopy(BUNDLE)
    bundle["body"]["peers"][0]["claim"] = ["challenge: 13 GFLOPS measured against 131 claimed"]
    proof = judge(bundle, copy.deepcopy(RESULTS), key=KEY)
    assert proof.holds, proof.problems
    assert any("not believed: challenge: 13 GFLOPS" in n for n in proof.notes)


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
        f"results[{len(RESULTS['results'])}] (task {{0}})",
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
        f"rows[{len(BUNDLE['body']['rows'])}] (task {{0}})",
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
    (
        "the body without the key",
        _body(lambda b: b["peers"][0].update(network="10.9.9.0/24")),
        "bundle.json body",
        False,
    ),
    ("results.json without the key", _set("swarm", ["somewhere"]), "results.json: its bytes", False),
]


def _results(change: Callable[[Doc], None]) -> Tamper:
    def tamper(_: Doc, results: Doc) -> None:
        change(results)

    return tamper


def _entry(results: Doc, suffix: str) -> Doc:
    (entry,) = (t for t in results["results"] if t["row"]["JobId"].endswith(suffix))
    return entry  # type: ignore[no-any-return]


def _member_dropped(bundle: Doc, results: Doc) -> None:
    """The submitter leaves a member out: its signed result and its row gone, the merged row kept."""
    bundle["body"]["rows"].pop(_row(MEMBERS[1]))
    results["results"].remove(_entry(results, MEMBERS[1]))


def _merged_without(bundle: Doc, results: Doc) -> None:
    """The submitter merges one member's records only, yet keeps both members' results: the merged
    row's figures made consistently by the submitter's own deriver, over the member it likes."""
    from protocol import GenerateSpec, GenerationStats
    from scheduler.results.fleetrows import merged_figures, merged_generation

    member = _entry(results, MEMBERS[0])
    kept = GenerationStats.model_validate(member["signed"]["measurement"]["generation"])
    (job,) = (j for j in results["campaign"]["jobs"] if (j["spec"]["generate"] or {}).get("fleet_size"))
    spec = GenerateSpec.model_validate(job["spec"]["generate"])
    merged = _entry(results, FLEET)
    merged["row"].update(merged_figures(spec, 2, [kept], [member["signed"]["worker"]]))
    merged["merged"]["e2e_ms"] = merged_generation(spec, [kept]).e2e_ms.model_dump(mode="json")


def test_a_member_lost_and_said_so_holds_with_a_note() -> None:
    """A member without a signed result (its worker died) is not in the merge: a merged row made
    from the other member's records, counting the lost one in Detail and FleetLost, holds; who was
    lost is the submitter's word, and verify says how many the deals counted."""
    from protocol import GenerateSpec, GenerationStats
    from scheduler.results.fleetrows import merged_figures, merged_generation

    bundle, results = copy.deepcopy(BUNDLE), copy.deepcopy(RESULTS)
    _member_dropped(bundle, results)
    member = _entry(results, MEMBERS[0])
    kept = GenerationStats.model_validate(member["signed"]["measurement"]["generation"])
    (job,) = (j for j in results["campaign"]["jobs"] if (j["spec"]["generate"] or {}).get("fleet_size"))
    spec = GenerateSpec.model_validate(job["spec"]["generate"])
    merged = _entry(results, FLEET)
    merged["row"].update(merged_figures(spec, 2, [kept], [member["signed"]["worker"]]))
    merged["row"]["FleetLost"] = "vm-1 (12D3KooW...): Failed lease lapsed"
    merged["row"]["Detail"] = "merged from the raw records of 1 of 2 members; lost: vm-1 (12D3KooW...)"
    merged["merged"]["e2e_ms"] = merged_generation(spec, [kept]).e2e_ms.model_dump(mode="json")
    proof = judge(bundle, results, key=KEY)
    assert proof.holds, proof.problems
    assert any("1 of the fleet's 2 members gave no signed result" in n for n in proof.notes), proof.notes


def _member_moved(body: Doc) -> None:
    body["rows"][_row(MEMBERS[0])]["job_index"] = 2


def _deal_moved(body: Doc) -> None:
    body["rows"][_row(MEMBERS[1])]["schedule"]["deal"]["start_at"] += 0.5


def _record_edited(results: Doc) -> None:
    record = _entry(results, MEMBERS[0])["signed"]["measurement"]["generation"]["records"][0]
    record["e2e_ms"] *= 0.5


def _payload_edited(body: Doc) -> None:
    part = body["rows"][_row(MEMBERS[1])]["result"]
    part["payload"] = _flip(part["payload"])


def _flip_verdict(results: Doc) -> None:
    row = _entry(results, f"{SEARCH}/2")["row"]
    row["LevelPassed"] = "False" if row["LevelPassed"] == "True" else "True"


def _flip_signed_verdict(results: Doc) -> None:
    level = _entry(results, SEARCH)["signed"]["measurement"]["capacity"]["levels"][0]
    level["passed"] = not level["passed"]


def _level_added(results: Doc) -> None:
    extra = copy.deepcopy(_entry(results, f"{SEARCH}/1"))
    extra["row"]["JobId"] = extra["row"]["JobId"].replace("/1", "/9")
    results["results"].insert(_at(f"{SEARCH}/1"), extra)


def _unsigned_row(results: Doc) -> None:
    fake = copy.deepcopy(results["results"][0])
    fake["signed"], fake["row"]["JobId"] = None, fake["row"]["JobId"] + "-more"
    results["results"].append(fake)


def _fleet_place(field: str) -> str:
    return f"results[{_at(FLEET)}] (task {_task(_at(FLEET))}) {field}"


def _level_place(n: int, field: str) -> str:
    return f"results[{_at(f'{SEARCH}/{n}')}] (task {_task(_at(SEARCH))}/{n}) {field}"


# (name, tamper, place named): each sealed again by the submitter (it holds the key)
DERIVED_CASES: list[tuple[str, Tamper, str]] = [
    (
        "a fleet member's record in results.json",
        _results(_record_edited),
        f"(task {_task(_at(MEMBERS[0]))}) signed.measurement.generation.records[0]",
    ),
    ("a fleet member's signed record", _body(_payload_edited), _fleet_place("row.Requests")),
    ("a member dropped from the merge", _member_dropped, f"(task {_task(_at(FLEET))}) row.Detail"),
    ("a member left out of the merged figures", _merged_without, _fleet_place("row.Requests")),
    ("a member moved to another job", _body(_member_moved), f"rows[{_row(MEMBERS[0])}]"),
    ("a member's deal", _body(_deal_moved), _fleet_place("FleetSize: member")),
    (
        "the merged figure",
        _set(f"results.{_at(FLEET)}.row.InferenceMsMedian", "1.000"),
        _fleet_place("row.Infer"),
    ),
    (
        "the merged figures kept in results.json",
        _set(f"results.{_at(FLEET)}.merged.e2e_ms.p99", lambda v: v * 0.5),
        _fleet_place("merged.e2e_ms.p99"),
    ),
    ("the fleet's size", _set(f"results.{_at(FLEET)}.row.FleetSize", "3"), _fleet_place("row.FleetSize")),
    (
        "the merged row dropped",
        lambda b, r: r["results"].pop(_at(FLEET)),
        "the fleet's merged row is missing",
    ),
    ("a level's verdict", _results(_flip_verdict), _level_place(2, "row.LevelPassed")),
    (
        "a level's signed verdict in results.json",
        _results(_flip_signed_verdict),
        f"results[{_at(SEARCH)}] (task {_task(_at(SEARCH))}) signed.measurement.capacity.levels[0].passed",
    ),
    (
        "the chosen capacity",
        _set(f"results.{_at(SEARCH)}.row.CapacityKnee", lambda v: str(int(v) * 2)),
        f"results[{_at(SEARCH)}] (task {_task(_at(SEARCH))}) row.CapacityKnee",
    ),
    (
        "the chosen capacity on a level row",
        _set(f"results.{_at(SEARCH + '/1')}.row.CapacityKnee", "4"),
        _level_place(1, "row.CapacityKnee"),
    ),
    (
        "a level's figure",
        _set(f"results.{_at(SEARCH + '/1')}.row.TtftMsMedian", "1.000"),
        _level_place(1, "row.Ttft"),
    ),
    (
        "a level row dropped",
        lambda b, r: r["results"].pop(_at(SEARCH + "/3")),
        "level 3 of the signed search",
    ),
    ("a level row added", _results(_level_added), "no signed search has this level"),
    (
        "a complete row without a signed result",
        _results(_unsigned_row),
        "a complete row with no signed result",
    ),
]


@pytest.mark.parametrize(("name", "tamper", "place"), DERIVED_CASES, ids=[c[0] for c in DERIVED_CASES])
def test_a_fleets_merged_row_and_a_searchs_levels_are_derived_again(
    name: str, tamper: Tamper, place: str
) -> None:
    """Neither has a signed result of its own: each is derived again from the signed records (a
    fleet's members', a search's levels), and any edit, even sealed by the submitter, is named."""
    bundle, results = copy.deepcopy(BUNDLE), copy.deepcopy(RESULTS)
    tamper(bundle, results)
    proof = judge(bundle, results, key=KEY)
    said = [str(p) for p in proof.problems]
    assert any(place in p for p in said), (place, said)


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
    assert len(refused) == len(BUNDLE["body"]["rows"]), proof.problems


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


def test_a_groups_replicas_of_two_classes_that_share_a_short_name_are_refused() -> None:
    """Issue 50, scope 7: a group names its class by the short name (for display), so a reader
    compares its replicas' classes whole. The cheater is the submitter with two colluding boards
    whose classes share the 32-bit name (a birthday pair, `kit.twins`): each replica's device is of
    the group's short name, and the two are still two classes."""
    from kit.twins import colliding

    from scheduler.results.proof import _check_rows, _replicas, read_bundle
    from scheduler.verification.classes import device_class

    bundle, _, report = read_bundle(
        (GOLDEN / "bundle.json").read_bytes(), (GOLDEN / "results.json").read_bytes()
    )
    derived = _check_rows(Proof(), bundle.body, report)
    group = bundle.body.groups[0]
    unit = report.campaign.jobs[group.job_index].spec.compute_unit
    first, twin = colliding()
    assert device_class(first, unit).name == device_class(twin, unit).name

    def judged(boards: tuple[Any, Any]) -> Proof:
        proof = Proof()
        held = {t: derived[t] for t in group.tasks}
        for task, board in zip(group.tasks, boards, strict=True):
            held[task] = dataclasses.replace(
                held[task], body=held[task].body.model_copy(update={"device": board})
            )
        named = group.model_copy(update={"device_class": device_class(first, unit).name})
        assert len(_replicas(proof, "groups[0]", named, report.campaign, held)) == 2
        return proof

    assert judged((first, first)).holds  # one class, whole: as the golden group is
    said = [str(p) for p in judged((first, twin)).problems]
    assert len(said) == 1, said
    assert "two classes that share the short name" in said[0]
    assert device_class(first, unit).id in said[0]
    assert device_class(twin, unit).id in said[0]
