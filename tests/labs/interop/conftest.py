"""A foreign gate for the interop tests: js-libp2p (tests/labs/interop/gate.mjs), installed by `npm ci`.

The gate is a child process that prints its multiaddr in a `ready` JSON line once it listens on a
port the kernel picked; it stops when its stdin closes.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kit.data import make_profile
from kit.procs import Lab, Proc

HERE = Path(__file__).resolve().parent
GATE_JS = HERE / "gate.mjs"


def _node() -> str:
    node = shutil.which("node")
    if node is None or not (HERE / "node_modules" / "libp2p").is_dir():
        pytest.fail("tests/labs/interop needs Node.js >= 20 and `npm ci` in it (.ci/deps runs it)")
    return node


def start_js_gate(lab: Lab, name: str = "js-gate", *flags: str) -> Proc:
    """Start the js-libp2p gate and wait for its ready line (its listen addresses)."""
    proc = lab.start(name, [_node(), str(GATE_JS), "gate", *flags], stdin=True)
    proc.ready = proc.wait_event("ready", 30)
    return proc


def js_find_providers(gate: str, hex_digests: list[str], timeout: float = 60.0) -> list[dict[str, Any]]:
    """Run the js-libp2p kad-dht client against `gate`: one `providers` event per key."""
    out = subprocess.run(
        [_node(), str(GATE_JS), "find", gate, *hex_digests],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    lab = Lab(tmp_path, record_ttl=30.0)
    try:
        yield lab
    finally:
        lab.close()


@pytest.fixture
def profile_file(tmp_path: Path) -> Path:
    path = tmp_path / "profile.json"
    path.write_text(make_profile().model_dump_json())
    return path
