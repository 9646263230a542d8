"""Issue 41, scope 4: the children that read a campaign's files start isolated from the caller's folder.

``python -m node.intake`` used to put the working directory first on ``sys.path``, so a ``yaml.py`` or
``resource.py`` beside the campaign ran inside the very child meant to contain hostile files, and
`plan` then blamed a memory or CPU limit. Here the folder holds both (each would write a marker file
and exit 3); `plan` and `submit` run as README writes them (the console script, from the campaign's
folder) and `serve` is started in that folder and sent campaigns to vet: each works, and no marker
is ever written.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest
from kit.procs import SCRIPT, Lab

ROOT = Path(__file__).resolve().parents[3]
CAMPAIGN = """name: beside-hostile-modules
model:
  path: models/tiny-convnet.onnx
jobs:
  - compute_unit: CPU (ONNX)
    num_inference_runs: 20
    warmup_runs: 2
"""
HOSTILE = """import pathlib, sys
pathlib.Path({marker!r}).write_text("ran")
sys.exit(3)
"""
MODULES = ("yaml", "resource", "json")


def _folder(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The campaign's folder with its hostile neighbours, and a user's environment with a fresh HOME."""
    folder = tmp_path / "campaign"
    (folder / "models").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "models" / "tiny-convnet.onnx", folder / "models")
    (folder / "campaign.yaml").write_text(CAMPAIGN)
    for name in MODULES:
        (folder / f"{name}.py").write_text(HOSTILE.format(marker=str(tmp_path / f"MARKER-{name}")))
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SARK_", "XDG_"))} | {"HOME": str(home)}
    return folder, env


def _markers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.glob("MARKER-*"))


@pytest.mark.parametrize("command", ["plan", "submit"])
def test_plan_and_submit_beside_a_hostile_yaml_py_run_none_of_it(tmp_path: Path, command: str) -> None:
    folder, env = _folder(tmp_path)
    done = subprocess.run(
        [*SCRIPT, command, "campaign.yaml"], cwd=folder, env=env, capture_output=True, text=True, timeout=240
    )
    out = done.stdout + done.stderr
    assert done.returncode == 0, out
    assert "Traceback" not in out, out
    assert _markers(tmp_path) == [], out
    if command == "plan":
        assert "job 0 CPU (ONNX): 1 of 1 task(s) placed" in out, out
    else:
        assert list((folder / "sark-results").glob("*/results.csv")), out


def test_serve_started_beside_a_hostile_yaml_py_vets_campaigns_with_none_of_it(tmp_path: Path) -> None:
    folder, env = _folder(tmp_path)
    lab = Lab(tmp_path)
    try:
        served = lab.start(
            "serve", [*SCRIPT, "serve", "--http", "127.0.0.1:0", "--events"], env=env, cwd=folder
        )
        api = f"{served.wait_event('http', 90)['url']}/api"
        invalid = httpx.post(
            f"{api}/campaigns", json={"name": "x", "jobs": [{"num_inference_runs": -1}]}, timeout=60
        )
        refused = httpx.post(  # valid, so the child hands it back; then the URL policy refuses loopback
            f"{api}/campaigns",
            json={"model_url": "http://127.0.0.1:9/m.onnx", "jobs": [{"compute_unit": "CPU (ONNX)"}]},
            timeout=60,
        )
        assert served.popen.poll() is None, served.log_excerpt()
    finally:
        lab.close()
    assert invalid.status_code == 400, invalid.text
    assert {p["rule"] for p in invalid.json()["problems"]} == {"invalid"}, invalid.text
    assert refused.status_code == 400, refused.text
    assert [p["rule"] for p in refused.json()["problems"]] == ["url_refused"], refused.text
    assert _markers(tmp_path) == []
