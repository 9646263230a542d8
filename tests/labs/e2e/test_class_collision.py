"""Issue 50, scope 7: a price rule names a device class whole, so a profile ground to share another
class's short name does not take its price.

A class's short name (`cls-` and 8 hex digits, results.csv's DeviceClass) is 32 bits of its key's
sha256: two profiles that share one cost about 2^16 tries (a birthday pair; one ground to match a given
class about 2^32). The lab grinds such a pair (two CPU boards that differ in their SoC string), runs
two real `sark-node join` workers on those profiles (`--profile`) and a campaign that prices the first
class by its whole id (`cls-` and 64 hex digits): the first board's row is costed at the campaign's
price, the second's (the same short name) at its owner's word (none), and a rule that names the short
name is refused before anything runs (exit 2, saying why).

The cheater's view: it chooses its whole profile, so its class key, and grinds as long as it likes; it
sees the short names in any report. The rule compares the 256-bit id, which no grinding reaches.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path

from kit.campaignlab import MODEL, CampaignLab, Swarm, submitter_id, write_campaign
from kit.twins import colliding

from protocol import ComputeUnit, DeviceProfile
from scheduler.verification.classes import DeviceClass, device_class

PRICE = 2.0
JOB = {
    "compute_unit": "CPU (ONNX)",
    "devices": "all",
    "num_inference_runs": 5,
    "warmup_runs": 1,
    "processes": 1,
}


def _class(profile: DeviceProfile) -> DeviceClass:
    return device_class(profile, ComputeUnit.CPU_ONNX)


def test_a_class_priced_by_its_whole_id_keeps_its_price_from_a_ground_twin(tmp_path: Path) -> None:
    first, twin = colliding()
    assert _class(first).name == _class(twin).name
    assert _class(first).id != _class(twin).id
    lab = CampaignLab(tmp_path, record_ttl=30.0)
    try:
        me = submitter_id(tmp_path / "submitter")
        gate = lab.gate(timeout=120).ready["addrs"][0]
        names = {}
        for name, profile in (("first", first), ("twin", twin)):
            (tmp_path / f"{name}.json").write_text(profile.model_dump_json())
            extra = ["--profile", str(tmp_path / f"{name}.json")]
            names[name] = lab.real_worker(name, [gate], me, wait=False, extra=extra)
        peers = {name: proc.wait_event("ready", 180)["peer_id"] for name, proc in names.items()}
        swarm = Swarm(lab, gate, {}, tmp_path / "submitter", tmp_path)
        for folder in ("short", "whole"):
            (tmp_path / folder).mkdir()
        body = {
            "name": "twins",
            "model": {"path": MODEL.name},
            "jobs": [JOB],
            "prices": [{"class": _class(first).id, "per_hour": PRICE}],
        }
        short = write_campaign(
            tmp_path / "short" / "c.yaml",
            {**body, "prices": [{"class": _class(first).name, "per_hour": PRICE}]},
        )
        refused = swarm.run("submit", str(short), "--out", str(tmp_path / "refused"), timeout=120)
        assert refused.returncode == 2, refused.stderr
        assert f"{_class(first).name} is a class's short name, for display" in refused.stderr
        assert not (tmp_path / "refused").exists()  # refused before anything ran

        campaign = write_campaign(tmp_path / "whole" / "c.yaml", body)
        done = swarm.run(
            "submit", str(campaign), "--wait-peers", "2", "--out", str(tmp_path / "out"), timeout=300
        )
    finally:
        lab.close()
    assert done.returncode == 0, done.stderr
    cid = re.search(r"^campaign (\S+)$", done.stdout, re.M)
    assert cid is not None, done.stdout
    with open(tmp_path / "out" / cid[1] / "results.csv", newline="") as f:
        rows = {row["WorkerPeerId"]: row for row in csv.DictReader(f)}
    assert {row["Status"] for row in rows.values()} == {"Complete"}, rows
    priced, other = rows[peers["first"]], rows[peers["twin"]]
    assert priced["DeviceClass"] == other["DeviceClass"] == _class(first).name  # one short name, shown
    assert (priced["PricePerHour"], priced["PriceSource"]) == (
        f"{PRICE:g}",
        f"campaign: class {_class(first).name}",
    )
    assert other["PricePerHour"] == ""  # its owner named no price, and the campaign's is not its class's
    assert other["CostPer1kInferences"] == ""
