"""The binary runs without Python: README's binary command's output, in a mount namespace where every
Python on the machine is hidden.

`.ci/run` builds the binary after the suite (`bash .ci/binary`, README's binary command) and runs this
file with ``SARK_BINARY=dist/sark-node/sark-node``; without that variable (the suite itself) it skips
and says so. Each command runs under ``unshare -m``: an empty tmpfs over every Python folder (pyenv,
/usr/lib/python3*, /usr/local/lib/python3*, the repository's venvs, this interpreter's prefixes) and
/dev/null over every ``python*`` on PATH, so the binary and every child it starts (the measurement
children, the campaign-vetting child of `serve`) can only use what the binary carries.
"""

from __future__ import annotations

import csv
import glob
import json
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from kit.procs import LOOPBACK, Lab

ROOT = Path(__file__).resolve().parents[3]
BINARY = os.environ.get("SARK_BINARY", "")
CAMPAIGN = ROOT / "examples" / "campaign.yaml"

pytestmark = [
    pytest.mark.binary,
    pytest.mark.skipif(
        not BINARY,
        reason="SARK_BINARY not set: `bash .ci/run` builds the binary and runs this after the suite",
    ),
    pytest.mark.skipif(
        os.geteuid() != 0 or shutil.which("unshare") is None,
        reason="needs root and unshare (mount namespace)",
    ),
]


def _python_folders() -> list[str]:
    patterns = ["/root/.pyenv", "/usr/lib/python3*", "/usr/local/lib/python3*", "/usr/lib/*/libpython3*"]
    found = {p for pattern in patterns for p in glob.glob(pattern)}
    found |= {str(ROOT / ".venv"), str(ROOT / "build" / "venv"), sys.prefix, sys.base_prefix}
    folders = sorted(os.path.realpath(p) for p in found if os.path.isdir(p))
    return [f for f in folders if not any(f.startswith(other + "/") for other in folders)]


def _python_files() -> list[str]:
    folders = {*os.environ.get("PATH", "").split(os.pathsep), "/usr/bin", "/usr/local/bin", "/bin"}
    found = {os.path.realpath(p) for d in folders if d for p in glob.glob(os.path.join(d, "python*"))}
    return sorted(p for p in found if os.path.isfile(p) and not p.startswith(tuple(_python_folders())))


def hidden(argv: list[str]) -> list[str]:
    """`argv` run in a new mount namespace where no Python can be found or started."""
    mounts = [f"mount -t tmpfs none {shlex.quote(d)}" for d in _python_folders()]
    mounts += [f"mount --bind /dev/null {shlex.quote(f)}" for f in _python_files()]
    script = " && ".join(["mount --make-rprivate /", *mounts, 'exec "$@"'])
    return ["unshare", "-m", "sh", "-c", script, "sh", *argv]


def _env(home: Path) -> dict[str, str]:
    env = {
        k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "SARK_", "PYTHON", "VIRTUAL_ENV"))
    }
    return {**env, "HOME": str(home), "PATH": "/usr/local/bin:/usr/bin:/bin"}


def sark(args: list[str], home: Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """One binary command, Python hidden, run from `home`."""
    argv = hidden([str(Path(BINARY).resolve()), *args])
    return subprocess.run(argv, cwd=home, env=_env(home), capture_output=True, text=True, timeout=timeout)


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path)
    yield lab
    lab.close()


def test_no_python_is_left_to_find(tmp_path: Path) -> None:
    probe = (
        "for p in python python3 python3.11; do command -v $p && exit 1; done; "
        "$0 -c pass 2>/dev/null && exit 1; echo no-python"
    )
    done = subprocess.run(
        hidden(["sh", "-c", probe, sys.executable]), env=_env(tmp_path), capture_output=True, text=True
    )
    # no python on PATH, and this very interpreter (the venv's, or pyenv's) cannot start either
    assert (done.returncode, done.stdout) == (0, "no-python\n"), done.stderr


def test_help_and_version(tmp_path: Path) -> None:
    done = sark(["--help"], tmp_path)
    assert done.returncode == 0, done.stderr
    assert "join" in done.stdout
    assert "submit" in done.stdout
    version = sark(["--version"], tmp_path)
    assert version.returncode == 0, version.stderr
    assert version.stdout.startswith("sark-node ")
    assert "binary linux-" in version.stdout


def test_info_has_onnx_and_says_torch_is_not_in_this_build(tmp_path: Path) -> None:
    done = sark(["info", "--json", "--no-calibrate"], tmp_path)
    assert done.returncode == 0, done.stderr
    units = {u["unit"]: u for u in json.loads(done.stdout)["units"]}
    assert units["CPU (ONNX)"]["usable"]
    assert not units["CPU (PyTorch)"]["usable"]
    assert "not in this build" in units["CPU (PyTorch)"]["reason"]
    left_out = ("CPU (OpenVINO)", "CPU (LiteRT)", "CPU (ExecuTorch)", "CPU (llama.cpp)", "GPU (llama.cpp)")
    for unit in left_out:  # runtimes left out of the binary
        assert not units[unit]["usable"], units[unit]
        assert "not in this build" in units[unit]["reason"], units[unit]


def test_submit_on_the_embedded_swarm_completes(tmp_path: Path) -> None:
    done = sark(["submit", str(CAMPAIGN), "--out", str(tmp_path / "out")], tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    (folder,) = (tmp_path / "out").iterdir()
    with (folder / "results.csv").open() as rows:
        complete = [r for r in csv.DictReader(rows) if r["Status"] == "Complete"]
    assert [r["ComputeUnits"] for r in complete] == ["CPU (ONNX)"]
    assert float(complete[0]["InferenceMsMedian"]) > 0
    assert "<svg" in (folder / "report.html").read_text()  # matplotlib drew the figures
    report = sark(["report", folder.name, "--format", "md"], tmp_path)  # from the store in HOME
    assert report.returncode == 0, report.stderr
    assert "CPU (ONNX)" in report.stdout


def test_plan_on_the_embedded_swarm(tmp_path: Path) -> None:
    done = sark(["plan", str(CAMPAIGN)], tmp_path, timeout=240)
    assert done.returncode == 0, done.stderr
    assert "GPU (ONNX)" in done.stdout  # the job no peer here can run, with its reason


def test_bench_runs_spawned_children(tmp_path: Path) -> None:
    model = ROOT / "examples" / "models" / "tiny-convnet.onnx"
    done = sark(["bench", str(model), "--unit", "CPU (ONNX)", "--runs", "20", "--processes", "2"], tmp_path)
    assert done.returncode == 0, done.stderr


def test_gate_and_join(lab: Lab, tmp_path: Path) -> None:
    binary = str(Path(BINARY).resolve())
    env = _env(tmp_path)
    gate_argv = [binary, "gate", "--listen", LOOPBACK, "--data-dir", str(tmp_path / "gate"), "--events"]
    gate = lab.start("gate", hidden(gate_argv), env=env)
    gate.ready = gate.wait_event("ready", 60)
    addr = next(a for a in gate.ready["addrs"] if "/ip4/127.0.0.1/" in a)
    join = [binary, "join", "--gate", addr, "--listen", LOOPBACK, "--data-dir", str(tmp_path / "worker")]
    join += ["--open", "--no-calibrate", "--events"]
    worker = lab.start("worker", hidden(join), env=env)
    ready = worker.wait_event("ready", 120)
    peers = sark(["peers", "--gate", addr, "--json"], tmp_path)
    assert peers.returncode == 0, peers.stderr
    listed = {p["peer_id"]: p for p in json.loads(peers.stdout.strip().splitlines()[-1])["peers"]}
    assert "CPU (ONNX)" in listed[ready["peer_id"]]["units"]


def test_serve_answers_and_vets_a_campaign_in_a_child(lab: Lab, tmp_path: Path) -> None:
    binary = str(Path(BINARY).resolve())
    argv = [binary, "serve", "--http", "127.0.0.1:0", "--workers", "1", "--events"]
    served = lab.start("serve", hidden(argv), env=_env(tmp_path))
    url = served.wait_event("http", 120)["url"]
    page = httpx.get(f"{url}/", timeout=30)
    assert page.status_code == 200
    assert "<html" in page.text.lower()  # the dashboard asset travelled in the binary
    # A posted campaign is validated by `sark-node -m node.intake`, a child of the binary.
    bad = httpx.post(
        f"{url}/api/campaigns",
        content=b"name: x\njobs: []\n",
        headers={"Content-Type": "application/yaml"},
        timeout=60,
    )
    assert bad.status_code == 400, bad.text
    # the child's own verdict (a child that failed to start is a 503 instead)
    assert {(p["path"], p["rule"]) for p in bad.json()["problems"]} >= {("jobs", "invalid")}
