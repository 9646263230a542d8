"""Memory footprint of the long-running roles: a gate, a joined worker and a submitter, side by side.

One gate and one worker (`join` as a user runs it: the device is detected and calibrated, no
`--profile`) start on loopback; once each is ready it idles for `--idle-s` seconds and its RSS is
read then ("idle"); "peak" is the kernel's high-water mark (`VmHWM` in /proc/PID/status), which
covers start-up and joining. A submitter then runs examples/campaign.yaml against the gate: its
idle figure is its RSS when it reports the campaign started, its peak the high-water mark
`wait4` returns when it exits (exact). After the campaign the gate and worker marks are read again
("peak, busy": the worker's own process, not its measuring children). Beside them, in the same run,
a bare interpreter and `import libp2p` as a plain program and as the node imports it (node.p2p.host,
with the unused libp2p subsystems left out). The worker's column `heavy` lists any runtime library
(libtorch, onnxruntime, transformers' or matplotlib's extension modules) mapped into it.
Prints a table and writes benchmarks/out/footprint.json.

    .venv/bin/python benchmarks/footprint.py [--rounds 3] [--idle-s 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]  # the repository, and the tests' kit

from kit.procs import SARK, Lab  # noqa: E402

HEAVY = re.compile(r"libtorch|libonnxruntime|onnxruntime_pybind|transformers|ft2font|libc10")
ROLES = ("gate", "worker", "submitter")
CAMPAIGN = ROOT / "examples" / "campaign.yaml"
PROBES = {
    "python (bare)": "pass",
    "import libp2p (plain)": "import libp2p",
    "import node.p2p.host (trimmed)": "import node.p2p.host",
}


def status_kib(pid: int) -> dict[str, int]:
    """VmRSS and VmHWM of a process, in KiB."""
    fields: dict[str, int] = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            fields[key] = int(value.split()[0])
    return fields


def mib(kib: int) -> float:
    return kib / 1024


def heavy_libraries(pid: int) -> list[str]:
    """The runtime libraries mapped into a process, by file name."""
    names = {Path(line.split()[-1]).name for line in Path(f"/proc/{pid}/maps").read_text().splitlines()}
    return sorted(n for n in names if HEAVY.search(n))


def probe_import(code: str) -> float:
    """RSS in MiB of a fresh interpreter after running `code`."""
    report = "import sys; print(open('/proc/self/status').read())"
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\n{report}"], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    return mib(int(re.search(r"VmRSS:\s+(\d+)", out).group(1)))  # type: ignore[union-attr]


def run_submitter(lab: Lab, gate: str, home: Path) -> dict[str, float]:
    """Run the example campaign against the gate: RSS when it started, peak from wait4."""
    argv = [*SARK, "submit", str(CAMPAIGN), "--gate", gate, "--data-dir", str(home / "submitter")]
    argv += ["--out", str(home / "results"), "--events"]
    proc = lab.start("submitter", argv)
    proc.events.get(timeout=120.0)  # its first event: the campaign is under way
    idle = mib(status_kib(proc.popen.pid)["VmRSS"])
    _, code, usage = os.wait4(proc.popen.pid, 0)
    proc.popen.returncode = os.waitstatus_to_exitcode(code)
    if proc.popen.returncode != 0:
        raise SystemExit(f"submit exited {proc.popen.returncode}:\n{proc.log_excerpt()}")
    return {"idle": idle, "peak": usage.ru_maxrss / 1024}


def one_round(idle_s: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        lab = Lab(home)
        try:
            submitter_id = subprocess.run(
                [*SARK, "id", "--data-dir", str(home / "submitter")],
                capture_output=True, text=True, check=True, cwd=ROOT,
            ).stdout.strip()  # fmt: skip
            gate = lab.gate(timeout=60.0)
            gate_addr = gate.ready["addrs"][0]
            argv = [*SARK, "join", "--gate", gate_addr, "--allow", submitter_id, "--listen",
                    "/ip4/127.0.0.1/tcp/0", "--data-dir", str(home / "worker"), "--events"]  # fmt: skip
            worker = lab.start("worker", argv)
            worker.ready = worker.wait_event("ready", 180.0)
            time.sleep(idle_s)  # idle means: ready, then left alone this long
            pids = {"gate": gate.popen.pid, "worker": worker.popen.pid}
            idle = {role: status_kib(pid) for role, pid in pids.items()}
            heavy = heavy_libraries(worker.popen.pid)
            submitter = run_submitter(lab, gate_addr, home)
            busy = {role: status_kib(pid) for role, pid in pids.items()}
        finally:
            lab.close()
    figures = {
        role: {
            "idle": mib(idle[role]["VmRSS"]),
            "peak": mib(idle[role]["VmHWM"]),
            "peak_busy": mib(busy[role]["VmHWM"]),
        }
        for role in pids
    }
    figures["submitter"] = {**submitter, "peak_busy": submitter["peak"]}
    return {"roles": figures, "worker_heavy_libraries": heavy}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--idle-s", type=float, default=5.0)
    args = parser.parse_args()
    rounds = [one_round(args.idle_s) for _ in range(args.rounds)]
    probes = {name: statistics.median(probe_import(code) for _ in range(3)) for name, code in PROBES.items()}
    kinds = ("idle", "peak", "peak_busy")
    table = {
        role: {k: statistics.median(r["roles"][role][k] for r in rounds) for k in kinds} for role in ROLES
    }
    gate_idle = table["gate"]["idle"]
    print(f"{'process':32} {'idle MiB':>9} {'peak MiB':>9} {'peak busy':>10} {'x gate idle':>12}")
    for role in ROLES:
        row = table[role]
        print(f"{role:32} {row['idle']:9.1f} {row['peak']:9.1f} {row['peak_busy']:10.1f} "
              f"{row['idle'] / gate_idle:12.2f}")  # fmt: skip
    for name, value in probes.items():
        print(f"{name:32} {value:9.1f} {'':9} {'':10} {value / gate_idle:12.2f}")
    heavy = sorted({lib for r in rounds for lib in r["worker_heavy_libraries"]})
    print(f"runtime libraries mapped in the worker: {', '.join(heavy) or 'none'}")
    out = ROOT / "benchmarks" / "out"
    out.mkdir(exist_ok=True)
    report = {"rounds": rounds, "medians_mib": table, "imports_mib": probes, "idle_s": args.idle_s}
    (out / "footprint.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
