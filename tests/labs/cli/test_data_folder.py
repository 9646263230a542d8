"""One data folder: `id`, `info`, `join`, `submit`, `serve` and `status`, given no flags, all use the
platform's user data folder (platformdirs), or an existing `~/.sark-node`. `id`, which resolves the
folder without the pydantic configuration (`node.datadir.data_folder`), finds the one `load_config`
finds for every mix of flag, environment and config file.

Real commands in subprocesses with a fresh HOME. The identity is the witness: `join` and `serve`
announce the peer id that `id` printed, so they read the same identity.key; `submit` stores its
campaign where `status` finds it; `info` caches its calibration where `join` reads it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from kit import zygote
from kit.procs import SARK, Lab

from node.config import DataDir, load_config
from node.datadir import data_folder

ROOT = Path(__file__).resolve().parents[3]
TINY = ROOT / "examples" / "models" / "tiny-convnet.onnx"


def _env(home: Path, xdg: Path | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "SARK_"))}
    env["HOME"] = str(home)
    if xdg is not None:
        env["XDG_DATA_HOME"] = str(xdg)
    return env


def _sark(args: list[str], env: dict[str, str], timeout: float = 120) -> str:
    done = zygote.run([*SARK, *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def lab(tmp_path: Path) -> Iterator[Lab]:
    procs = Lab(tmp_path / "lab")
    (tmp_path / "lab").mkdir()
    try:
        yield procs
    finally:
        procs.close()


# XDG_DATA_HOME set in the lab tier (`-m slow`): the folder it names is pinned by the `id` tests below.
XDG = [False, pytest.param(True, marks=pytest.mark.slow)]


@pytest.mark.parametrize("xdg", XDG, ids=["xdg-unset", "xdg-set"])
def test_every_command_uses_one_data_folder(xdg: bool, tmp_path: Path, lab: Lab) -> None:
    home = tmp_path / "home"
    home.mkdir()
    xdg_home = tmp_path / "xdg" if xdg else None
    env = _env(home, xdg_home)
    data = DataDir((xdg_home or home / ".local" / "share") / "sark-node")

    me = _sark(["id"], env).strip()
    assert data.key_file.is_file()

    _sark(["info", "--json"], env)
    assert list(data.calibration.glob("calibration-*.json"))

    gate = lab.gate()
    join = lab.start("join", [*SARK, "join", "--gate", gate.ready["addrs"][0], "--events"], env=env)
    assert join.wait_event("ready", 60)["peer_id"] == me
    lab.kill(join)

    serve = lab.start("serve", [*SARK, "serve", "--http", "127.0.0.1:0", "--events"], env=env)
    assert serve.wait_event("http", 60)["peer_id"] == me
    lab.kill(serve)

    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(
        f"name: one-folder\nprocesses: 1\nmodel: {{path: {TINY}}}\n"
        "jobs:\n  - {compute_unit: CPU (ONNX), num_inference_runs: 5, warmup_runs: 1, load_runs: 1}\n"
    )
    _sark(["submit", str(campaign), "--json", "--out", str(tmp_path / "out")], env, timeout=240)
    stored = json.loads(_sark(["status", "--json"], env))["campaigns"]
    assert [c["name"] for c in stored] == ["one-folder"]
    assert data.campaigns.is_file()
    assert not (home / ".sark-node").exists()


def test_an_existing_legacy_folder_is_kept(tmp_path: Path) -> None:
    legacy = tmp_path / ".sark-node"
    legacy.mkdir()
    me = _sark(["id"], _env(tmp_path, None)).strip()
    assert (legacy / "identity.key").is_file()
    assert not (tmp_path / ".local").exists()
    assert _sark(["id"], _env(tmp_path, None)).strip() == me


def test_the_standard_folder_wins_once_it_exists(tmp_path: Path) -> None:
    (tmp_path / ".sark-node").mkdir()
    standard = tmp_path / "xdg" / "sark-node"
    standard.mkdir(parents=True)
    _sark(["id"], _env(tmp_path, tmp_path / "xdg"))
    assert (standard / "identity.key").is_file()
    assert not (tmp_path / ".sark-node" / "identity.key").exists()


@pytest.mark.parametrize("flag", [False, True], ids=["no-flag", "flag"])
@pytest.mark.parametrize("env", [False, True], ids=["no-env", "env"])
@pytest.mark.parametrize("setting", [False, True], ids=["no-setting", "setting"])
def test_id_finds_the_folder_that_load_config_finds(
    flag: bool, env: bool, setting: bool, tmp_path: Path
) -> None:
    """`id` resolves the folder without the pydantic configuration: flag, SARK_DATA_DIR, file, default."""
    file = tmp_path / "sark.toml"
    file.write_text(f'data_dir = "{tmp_path / "file"}"\n' if setting else "heartbeat_s = 1.0\n")
    environ = {"SARK_DATA_DIR": str(tmp_path / "env")} if env else {}
    given = tmp_path / "flag" if flag else None
    assert data_folder(file, environ, given).root == load_config(file, environ, data_dir=given).data_dir


def test_id_reads_the_data_dir_of_its_config_file(tmp_path: Path) -> None:
    file = tmp_path / "sark.toml"
    file.write_text(f'data_dir = "{tmp_path / "node"}"\n')
    me = _sark(["id", "--config", str(file)], _env(tmp_path, None)).strip()
    assert me.startswith("12D3KooW")
    assert DataDir(tmp_path / "node").key_file.is_file()


@pytest.mark.parametrize(
    ("text", "says"),
    [(None, "cannot read"), ("data_dir = [", "is not valid"), ("data_dir = 3", "data_dir")],
    ids=["missing", "not-toml", "not-a-path"],
)
def test_id_with_a_bad_config_file_exits_2(text: str | None, says: str, tmp_path: Path) -> None:
    file = tmp_path / "sark.toml"
    if text is not None:
        file.write_text(text)
    done = zygote.run(
        [*SARK, "id", "--config", str(file)],
        env=_env(tmp_path, None),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert says in done.stderr
    assert not (tmp_path / ".local").exists()  # no identity made anywhere
