"""Issue 49, scope 3: `sark-node peers --challenge` as a user types it after `sark-node submit`: it
runs as the submitter of the default data folder (the workers take offers from that identity and
answer only its challenge), and it leaves nothing behind in the temporary folder.

Real processes: a gate and two `join` workers allowing the submitter (`sark-node id` of the data
folder `SARK_DATA_DIR` names, as the user's default one would be), each advertising a written
profile (no device probe: the lab starts in seconds) whose claim is far below this machine's
speed; then `peers --gate G --challenge --json`, with no `--data-dir`, under that environment.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from kit import zygote
from kit.campaignlab import CampaignLab
from kit.procs import SARK

from protocol import Calibration, ComputeUnit, DeviceProfile, UnitStatus


def _profile(path: Path) -> Path:
    profile = DeviceProfile(
        device_name="w", soc="test-cpu", cores_physical=1, cores_logical=2, ram_mb=1024, os="Linux",
        os_version="6", fingerprint="f" * 16,
        units=(UnitStatus(unit=ComputeUnit.CPU_ONNX, usable=True, provider="CPUExecutionProvider"),),
        calibration=Calibration(cpu_gflops=1.0, mem_bandwidth_gbs=10.0, seconds=1.0),
    )  # fmt: skip
    path.write_text(profile.model_dump_json())
    return path


def test_peers_challenge_runs_as_the_submitter_and_every_worker_answers(tmp_path: Path) -> None:
    home, temp = tmp_path / "default-data", tmp_path / "tmp"
    temp.mkdir()
    env = {**os.environ, "SARK_DATA_DIR": str(home), "TMPDIR": str(temp)}

    def sark(*args: str) -> subprocess.CompletedProcess[str]:
        return zygote.run([*SARK, *args], capture_output=True, text=True, timeout=240, env=env)

    me = sark("id").stdout.strip()
    (tmp_path / "lab").mkdir()
    lab = CampaignLab(tmp_path / "lab", record_ttl=30.0)
    try:
        gate = lab.gate().ready["addrs"][0]
        profile = _profile(tmp_path / "profile.json")
        ids = {
            lab.real_worker(name, [gate], me, extra=["--profile", str(profile)]).ready["peer_id"]
            for name in ("w1", "w2")
        }
        listed = sark("peers", "--gate", gate, "--challenge", "--json")
    finally:
        lab.close()
    assert listed.returncode == 0, listed.stderr[-3000:]
    peers = {p["peer_id"]: p for p in json.loads(listed.stdout)["peers"]}
    assert ids <= set(peers), (ids, list(peers))
    verdicts = {peer: {c["unit"]: c["verdict"] for c in peers[peer]["challenge"]} for peer in ids}
    assert verdicts == {peer: {"CPU": "borne out"} for peer in ids}, listed.stdout[-3000:]
    assert sorted(p.name for p in temp.iterdir()) == []  # nothing left behind
