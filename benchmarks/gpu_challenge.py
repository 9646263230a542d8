"""The GPU challenge on a real GPU (issue 54): the honest claim borne out, a claim of 3x refused.

Real processes, as tests/labs/e2e/test_challenge.py starts them: a gate and two `sark-node join`
workers on this machine, each with a written profile (`join --profile`). The honest one advertises
this device as `sark-node info --json` probed it, `GPU (PyTorch)` on cuda:0 with the TFLOPS its own
probe measured on the challenge's kernel; the liar advertises the same device under its own name
(a class of one) with 3x that figure on cuda:0. `sark-node peers --challenge --json` then challenges
both over `/sark/challenge/1.1.0` (a drawn chain on the GPU in the worker's child, its rows committed,
checked and timed). Printed: each peer's claimed and measured GFLOPS per unit and the verdict;
writes benchmarks/out/gpu_challenge.json. Exit 0 when the honest GPU claim is borne out and the
3x claim refused, 1 otherwise.
    python benchmarks/gpu_challenge.py [--factor 3] [--profile info.json]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from kit.campaignlab import CampaignLab, Swarm, submitter_id  # noqa: E402
from kit.procs import SARK  # noqa: E402

from protocol import ComputeUnit, DeviceProfile  # noqa: E402

OUT = ROOT / "benchmarks" / "out" / "gpu_challenge.json"


def probed(root: Path) -> DeviceProfile:
    """This device's profile as `sark-node info --json` probes it (GPU TFLOPS measured there)."""
    done = subprocess.run(
        [*SARK, "info", "--json", "--data-dir", str(root / "probe")],
        capture_output=True,
        text=True,
        timeout=600,
    )
    if done.returncode != 0:
        raise SystemExit(f"sark-node info failed ({done.returncode}): {done.stderr[-2000:]}")
    return DeviceProfile.model_validate_json(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--factor", type=float, default=3.0)
    parser.add_argument("--profile", type=Path, help="`sark-node info --json`'s output, taken already")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        given = args.profile and DeviceProfile.model_validate_json(args.profile.read_text())
        honest = given or probed(root)
        cal = honest.calibration
        if cal is None or not cal.gpu_tflops:
            print(f"no GPU TFLOPS in the probed profile (GPUs: {honest.gpus}; {honest.gpu_reason})")
            return 1
        torch_gpu = next(u for u in honest.units if u.unit == ComputeUnit.GPU_TORCH)
        if not torch_gpu.usable:
            print(f"GPU (PyTorch) is not usable here: {torch_gpu.reason}")
            return 1
        lie = {dev: tflops * args.factor for dev, tflops in cal.gpu_tflops.items()}
        liar = honest.with_(
            device_name="gpu-liar",
            soc=f"{honest.soc} (liar)",
            fingerprint="e" * 16,
            calibration=cal.with_(gpu_tflops=lie),
        )
        files = {"honest": root / "honest.json", "liar": root / "liar.json"}
        files["honest"].write_text(honest.model_dump_json())
        files["liar"].write_text(liar.model_dump_json())
        lab = CampaignLab(root, record_ttl=30.0)
        try:
            me = submitter_id(root / "submitter")
            gate = lab.gate().ready["addrs"][0]
            started = {
                name: lab.real_worker(name, [gate], me, wait=False, extra=["--profile", str(path)])
                for name, path in files.items()
            }
            ids = {name: proc.wait_event("ready", 120)["peer_id"] for name, proc in started.items()}
            swarm = Swarm(lab, gate, {}, root / "submitter", root)
            listed = swarm.run("peers", "--challenge", "--json", "--timeout", "30", timeout=300)
        finally:
            lab.close()
    if listed.returncode != 0:
        print(f"peers --challenge failed ({listed.returncode}): {listed.stderr[-3000:]}")
        return 1
    peers = {p["peer_id"]: p for p in json.loads(listed.stdout)["peers"]}
    verdicts: dict[str, dict[str, object]] = {}
    for name, peer_id in ids.items():
        rounds = {c["unit"]: c for c in peers.get(peer_id, {}).get("challenge", [])}
        verdicts[name] = rounds
        for unit, c in rounds.items():
            print(
                f"{name:<6} {unit:<24} claimed {c.get('claimed_gflops', 0):,.0f} GFLOPS, measured "
                f"{c.get('measured_gflops', 0):,.0f}: {c.get('verdict')} {c.get('reason', '')}"
            )
    gpu_unit = next((u for u in verdicts.get("honest", {}) if u.startswith("GPU")), "")

    def verdict(name: str) -> object:
        found = verdicts.get(name, {}).get(gpu_unit)
        return found.get("verdict") if isinstance(found, dict) else None

    honest_ok = bool(gpu_unit) and verdict("honest") == "borne out"
    liar_refused = bool(gpu_unit) and verdict("liar") == "refused"
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {"gpu_tflops_probed": cal.gpu_tflops, "factor": args.factor, "peers": verdicts},
            indent=1,
            default=str,
        )
    )
    print(f"honest GPU claim borne out: {honest_ok}; {args.factor:g}x claim refused: {liar_refused}")
    print(f"wrote {OUT}")
    return 0 if honest_ok and liar_refused else 1


if __name__ == "__main__":
    sys.exit(main())
