"""The CLI starts at once: help and the light commands load no libp2p, onnxruntime, matplotlib or torch.

Each case runs the real `sark-node` entry point in a fresh interpreter (a subprocess) and lists the
modules it loaded. Speed itself is measured by benchmarks/startup.py, never asserted here; what these
tests pin is its cause: `--help` loads the command modules and typer, and none of the packages whose
import made it 5x slower once (issue 22: a module-level `import scheduler` in `node/cli/exits.py`
pulled in every pydantic model of `protocol`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
HEAVY = ("libp2p", "onnxruntime", "matplotlib", "torch")
MODELS = ("pydantic", "scheduler", "protocol", "drivers", "gate", "yaml", "trio", "numpy", "msgpack")
"""What `--help` must not load: pydantic and the packages made of its models, runtimes, the event loop."""
HELP_OWN_MODULES = {
    "node",
    "node.cli",
    "node.cli.campaign",
    "node.cli.live",
    "node.cli.local",
    "node.cli.options",
    "node.cli.owner",
    "node.cli.proof",
    "node.cli.report",
    "node.cli.schema",
    "node.cli.serve",
    "node.cli.service",
    "node.cli.stored",
    "node.cli.swarm",
    "node.errors",
    "node.events",
}
"""Every module of ours that `--help` loads: the command modules and the two light ones they share."""
PROBE = """
import json, sys
from node.cli import main
sys.argv = ["sark-node", *sys.argv[1:]]
try:
    main()
except SystemExit as exc:
    code = exc.code
else:
    code = 0
def models():  # every pydantic model class defined so far (typer 0.29 imports pydantic for options)
    if "pydantic.main" not in sys.modules:
        return []
    found, todo = [], list(sys.modules["pydantic.main"].BaseModel.__subclasses__())
    while todo:
        cls = todo.pop()
        found.append(f"{cls.__module__}.{cls.__qualname__}")
        todo.extend(cls.__subclasses__())
    return sorted(found)
print(json.dumps({"code": code, "modules": sorted(sys.modules), "models": models()}), file=sys.stderr)
"""


def _run(args: list[str], home: Path) -> tuple[dict[str, object], str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "SARK_"))}
    env["HOME"] = str(home)
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    report: dict[str, object] = json.loads(done.stderr.strip().splitlines()[-1])
    return report, done.stdout


@pytest.mark.parametrize(
    "args", [["--help"], ["id"], ["status"], ["peers", "--help"], ["join", "--help"]], ids=" ".join
)
def test_light_commands_load_no_heavy_runtime(args: list[str], tmp_path: Path) -> None:
    report, _ = _run(args, tmp_path)
    assert report["code"] in (0, None)
    modules = report["modules"]
    assert isinstance(modules, list)
    assert "node.cli.swarm" in modules  # the probe really ran the CLI with every command registered
    assert sorted(m for m in modules if m.split(".")[0] in HEAVY) == []


def test_help_loads_only_the_command_modules(tmp_path: Path) -> None:
    report, text = _run(["--help"], tmp_path)
    modules = report["modules"]
    assert isinstance(modules, list)
    assert "submit" in text
    ours = {m for m in modules if m.split(".")[0] in ("node", "scheduler", "protocol", "drivers", "gate")}
    assert ours == HELP_OWN_MODULES
    assert sorted(m for m in modules if m.split(".")[0] in MODELS) == []


def test_id_loads_no_pydantic_model(tmp_path: Path) -> None:
    """`id` resolves the data folder and derives the peer id without the configuration model or `protocol`.

    typer (0.29) imports pydantic itself to coerce option values, so the library may be loaded: what
    is pinned is that no model class exists, and none of the packages made of models was imported."""
    report, text = _run(["id"], tmp_path)
    assert report["code"] in (0, None)
    assert text.startswith("12D3KooW")
    modules = report["modules"]
    assert isinstance(modules, list)
    assert sorted(m for m in modules if m.split(".")[0] in MODELS and m.split(".")[0] != "pydantic") == []
    assert "node.config" not in modules
    assert report["models"] == []


def test_the_probe_sees_a_model_and_a_heavy_import(tmp_path: Path) -> None:
    report, _ = _run(["info", "--json", "--no-calibrate"], tmp_path)
    modules = report["modules"]
    assert isinstance(modules, list)
    assert "onnxruntime" in modules
    models = report["models"]
    assert isinstance(models, list)
    assert "protocol.values.DeviceProfile" in models


@pytest.mark.parametrize("command", ["join", "submit", "serve", "info", "bench", "gate", "peers", "report"])
def test_flags_read_as_flags_in_help(command: str, tmp_path: Path) -> None:
    _, text = _run([command, "--help"], tmp_path)
    assert "--help" in text
    assert "<bool>" not in text
