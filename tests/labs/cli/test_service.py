"""`sark-node service`: the unit and agent it writes, and install, status, uninstall in a scratch home.

The systemd unit is checked by `systemd-analyze verify` (Debian's `systemd` package; .ci/deps installs
it); the launchd plist by plistlib; the commands run as real processes with HOME and XDG_CONFIG_HOME in
a temporary folder and no service manager on PATH, so they never touch this machine's own services.
The last test runs the installed unit's command line itself: it joins a gate and leaves on SIGTERM.
"""

from __future__ import annotations

import json
import os
import plistlib
import re
import shlex
import shutil
import signal
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
from kit.procs import Lab

from node.config import NodeConfig, load_config
from node.errors import ConfigError
from node.service import (
    LABEL,
    ServicePaths,
    join_argv,
    node_command,
    render_config,
    render_plist,
    render_unit,
)
from node.worker.leave import LEAVE_S

ROOT = Path(__file__).resolve().parents[3]
GATE = "/ip4/127.0.0.1/tcp/4001/p2p/12D3KooWJQPHjrivtP2YnhYNYWN5Hn6DDrEue8WVUDid1mZachZU"
PEER = "12D3KooWCx3DTDeChPGu6qekB5n86CSeHpygDtVaUWbrq9Du8NUa"


def _unit_keys(text: str) -> dict[str, str]:
    return dict(line.split("=", 1) for line in text.splitlines() if re.match(r"^[A-Za-z]+=", line))


def test_the_unit_runs_join_with_the_config_restarts_on_failure_and_logs_to_the_journal() -> None:
    argv = join_argv(("/opt/sark/sark-node",), Path("/home/u/.config/sark-node/node.toml"))
    keys = _unit_keys(render_unit(argv))
    assert (
        keys["ExecStart"] == '"/opt/sark/sark-node" "join" "--config" "/home/u/.config/sark-node/node.toml"'
    )
    assert (keys["Restart"], keys["RestartPreventExitStatus"]) == ("on-failure", "2")
    assert float(keys["RestartSec"]) > 0
    assert (keys["StandardOutput"], keys["StandardError"]) == ("journal", "journal")
    assert (keys["KillSignal"], keys["KillMode"]) == ("SIGTERM", "mixed")  # SIGTERM to join, not its child
    assert float(keys["TimeoutStopSec"]) > LEAVE_S
    assert keys["WantedBy"] == "default.target"
    assert keys["StartLimitIntervalSec"] == "0"  # no start limit: an outage never stops it for good
    assert "StartLimitBurst" not in keys


def test_the_unit_verifies(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not found: install Debian's `systemd` package (.ci/deps does)")
    odd = tmp_path / "odd dir 100%"  # a space and a specifier in the executable's path
    odd.mkdir()
    (odd / "sark-node").symlink_to(sys.executable)  # verify checks that the executable exists
    config = tmp_path / 'cfg $HOME "q" \\x 5%' / "node.toml"  # and the argument quoting
    text = render_unit(join_argv((str(odd / "sark-node"),), config))
    assert f'"{odd}%/sark-node" "join" "--config" ' in text
    assert '/cfg $$HOME \\"q\\" \\\\x 5%%/node.toml"' in text
    unit = tmp_path / "user" / "sark-node.service"
    unit.parent.mkdir()
    unit.write_text(text)
    runtime = tmp_path / "run"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "HOME": str(tmp_path), "XDG_RUNTIME_DIR": str(runtime)}
    env["XDG_CONFIG_HOME"] = str(tmp_path / "cfg")
    done = subprocess.run(
        [analyze, "--user", "verify", str(unit)], capture_output=True, text=True, env=env, timeout=60
    )
    said = (done.stdout + done.stderr).strip()
    assert done.returncode == 0, said
    assert said == "", said  # verify reports unknown keys and bad values as warnings, with exit 0


def test_an_executable_path_systemd_refuses_is_bad_input() -> None:
    with pytest.raises(ConfigError):
        render_unit(join_argv(('/opt/a "b"/sark-node',), Path("/c/node.toml")))


@pytest.mark.parametrize("render", ["unit", "plist"])
def test_a_control_character_never_reaches_a_unit_or_plist(render: str, tmp_path: Path) -> None:
    argv = join_argv(("/opt/sark-node",), Path("/home/u/cfg\nExecStartPre=/bin/sh/node.toml"))
    with pytest.raises(ConfigError, match="control character"):  # not plistlib's ValueError
        render_unit(argv) if render == "unit" else render_plist(argv, tmp_path)


def test_the_launchd_agent_is_a_well_formed_plist_that_keeps_join_alive_on_failure(tmp_path: Path) -> None:
    paths = ServicePaths.of("launchd", {}, tmp_path)
    argv = join_argv(("/Applications/sark-node",), paths.config)
    assert paths.logs is not None
    agent = plistlib.loads(render_plist(argv, paths.logs))
    assert paths.unit == tmp_path / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    assert agent["Label"] == LABEL
    assert agent["ProgramArguments"] == ["/Applications/sark-node", "join", "--config", str(paths.config)]
    assert agent["KeepAlive"] == {"SuccessfulExit": False}
    assert agent["RunAtLoad"] is True
    assert Path(agent["StandardOutPath"]).parent == tmp_path / "Library" / "Logs" / "sark-node"
    assert Path(agent["StandardErrorPath"]).parent == paths.logs


def test_systemd_paths_follow_xdg_config_home(tmp_path: Path) -> None:
    default = ServicePaths.of("systemd", {}, tmp_path)
    assert default.unit == tmp_path / ".config" / "systemd" / "user" / "sark-node.service"
    moved = ServicePaths.of("systemd", {"XDG_CONFIG_HOME": str(tmp_path / "x")}, tmp_path)
    assert moved.unit == tmp_path / "x" / "systemd" / "user" / "sark-node.service"
    assert moved.config == tmp_path / "x" / "sark-node" / "node.toml"


def test_the_service_runs_this_very_node(tmp_path: Path) -> None:
    assert node_command("/opt/sark-node", frozen=True) == ("/opt/sark-node",)
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    assert node_command(str(venv / "python"), frozen=False) == (str(venv / "python"), "-m", "node.cli")
    (venv / "sark-node").write_text("#!/bin/sh\n")
    assert node_command(str(venv / "python"), frozen=False) == (str(venv / "sark-node"),)


def test_the_config_file_reads_back_as_written(tmp_path: Path) -> None:
    settings: dict[str, Any] = {
        "gates": [GATE],
        "allow": [PEER],
        "device_name": 'bench "rig" \\ №1',
        "open_mode": False,
        "record_ttl_s": 60.0,
        "endpoints": {"llama cpp": "http://127.0.0.1:8080/v1"},
    }
    path = tmp_path / "node.toml"
    path.write_text(render_config(settings))
    assert tomllib.loads(path.read_text()) == settings
    assert load_config(path, {}).device_name == settings["device_name"]


def _cli(
    home: Path, *args: str, env: dict[str, str] | None = None, python: str = sys.executable
) -> subprocess.CompletedProcess[str]:
    """`sark-node` with a scratch home and no service manager on PATH (`env` over that)."""
    empty = home / "empty-path"
    empty.mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith(("XDG_", "SARK_"))}
    base |= {"HOME": str(home), "XDG_CONFIG_HOME": str(home / "cfg"), "PATH": str(empty)}
    base["PYTHONPATH"] = str(ROOT)
    argv = [python, "-m", "node.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, env=base | (env or {}), cwd=ROOT, timeout=120)


def test_install_status_uninstall_in_a_scratch_home(tmp_path: Path) -> None:
    unit = tmp_path / "cfg" / "systemd" / "user" / "sark-node.service"
    config = tmp_path / "cfg" / "sark-node" / "node.toml"
    assert json.loads(_cli(tmp_path, "service", "status", "--json").stdout)["installed"] is False

    done = _cli(tmp_path, "service", "install", "--gate", GATE, "--allow", PEER, "--no-calibrate")
    assert done.returncode == 0, done.stderr
    assert "systemctl --user enable sark-node.service" in done.stdout  # no manager here: what to run
    settings = load_config(config, {})
    assert (settings.gates, settings.allow, settings.calibrate) == ((GATE,), (PEER,), False)
    assert settings.data_dir == tmp_path / ".local" / "share" / "sark-node"  # this user's identity, pinned
    assert config.stat().st_mode & 0o077 == 0
    exec_start = _unit_keys(unit.read_text())["ExecStart"]
    assert shlex.split(exec_start)[-3:] == ["join", "--config", str(config)]

    again = _cli(tmp_path, "service", "install", "--open")  # settings merge over the file's
    assert again.returncode == 0, again.stderr
    assert (load_config(config, {}).gates, load_config(config, {}).open_mode) == ((GATE,), True)

    state = json.loads(_cli(tmp_path, "service", "status", "--json").stdout)
    assert (state["installed"], state["unit"], state["config"]) == (True, str(unit), str(config))
    assert state["enabled"].startswith("unknown")
    assert state["active"].startswith("unknown")
    assert "journalctl --user -u sark-node" in state["logs"]

    gone = _cli(tmp_path, "service", "uninstall")
    assert gone.returncode == 0, gone.stderr
    assert not unit.exists()
    assert config.exists()  # the settings stay
    assert json.loads(_cli(tmp_path, "service", "status", "--json").stdout)["installed"] is False


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--allow", PEER], "give at least one --gate"),
        (["--gate", "not-an-address"], "multiaddr"),
        (["--config", "missing.toml"], "no config file"),
        (["--config", "missing.toml", "--open"], "not both"),
    ],
)
def test_install_refuses_bad_settings_with_exit_2(tmp_path: Path, args: list[str], says: str) -> None:
    done = _cli(tmp_path, "service", "install", *args)
    assert done.returncode == 2, done.stdout + done.stderr
    assert says in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "cfg" / "systemd").exists()


def test_the_installed_command_joins_and_leaves_on_sigterm_with_exit_0(tmp_path: Path) -> None:
    lab = Lab(tmp_path, record_ttl=30.0)
    try:
        gate = lab.gate().ready["addrs"][0]
        done = _cli(
            tmp_path, "service", "install", "--gate", gate, "--open", "--no-calibrate",
            "--listen", "/ip4/127.0.0.1/tcp/0",
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        unit = tmp_path / "cfg" / "systemd" / "user" / "sark-node.service"
        argv = shlex.split(_unit_keys(unit.read_text())["ExecStart"])  # no % or $ in these paths
        env = {**os.environ, "HOME": str(tmp_path), "PYTHONPATH": str(ROOT)}
        worker = lab.start("service", [*argv, "--events"], env=env)
        ready = worker.wait_event("ready", 90)
        assert ready["role"] == "worker"
        worker.popen.send_signal(signal.SIGTERM)
        assert worker.popen.wait(timeout=LEAVE_S) == 0, worker.log_excerpt()
        assert worker.wait_event("left", 5)["released"] == []
    finally:
        lab.close()


def test_every_install_option_can_be_set_and_taken_back(tmp_path: Path) -> None:
    """Issue 30: after `install --open`, `install --allow ID` left `open_mode = true`; no flag turned
    plain-http models or calibration back off, and no list could be emptied."""
    config = tmp_path / "cfg" / "sark-node" / "node.toml"

    def install(*args: str) -> NodeConfig:
        done = _cli(tmp_path, "service", "install", *args)
        assert done.returncode == 0, done.stderr
        return load_config(config, {})

    first = install(
        "--gate", GATE, "--open", "--allow-http", "--no-calibrate", "--allow-network", "10.0.0.0/8"
    )
    assert (first.open_mode, first.allow_http, first.calibrate) == (True, True, False)
    assert first.allow_networks == ("10.0.0.0/8",)
    only = install("--allow", PEER)  # names who may submit: the worker takes nobody else now
    assert (only.open_mode, only.allow, only.gates) == (False, (PEER,), (GATE,))
    other = "12D3KooWJQPHjrivtP2YnhYNYWN5Hn6DDrEue8WVUDid1mZachZU"
    assert install("--allow", other).allow == (other,)  # the list is replaced, not added to
    back = install("--open", "--no-allow-http", "--calibrate", "--reset", "allow-network", "--reset", "allow")
    assert (back.open_mode, back.allow_http, back.calibrate) == (True, False, True)
    assert (back.allow_networks, back.allow) == ((), ())
    assert install("--no-open", "--allow", PEER).open_mode is False


@pytest.mark.parametrize(
    ("args", "env", "says"),
    [
        (["--gate", GATE.rsplit("/p2p/", 1)[0], "--open"], {}, "error: --gate: no /p2p/<peer id>"),
        (["--gate", GATE + "\nExecStartPre=/bin/sh -c id", "--open"], {}, "error: --gate: "),
        (["--gate", "/ip4/1.2.3.4/tcp/1/p2p/" + PEER + "\n", "--open"], {}, "error: --gate: "),
        (["--gate", GATE, "--allow", "someone"], {}, "error: --allow: not a peer id: 'someone'"),
        (["--gate", GATE, "--open", "--listen", "/ip4/0.0.0.0/tcp/0\n"], {}, "error: --listen: "),
        (["--gate", GATE, "--open", "--reset", "data-dir"], {}, "error: --reset: no such setting"),
        (["--gate", GATE, "--open"], {"XDG_CONFIG_HOME": "CFG\nExecStartPre=/bin/sh"}, "XDG_CONFIG_HOME: "),
        (["--config", "CFG/a\nExecStartPre=/bin/sh/node.toml"], {}, "error: --config: a control character"),
    ],
    ids=["gate-no-p2p", "gate-newline", "gate-trailing-newline", "allow", "listen", "reset", "xdg", "config"],
)
def test_install_checks_every_value_as_join_does_before_writing_anything(
    tmp_path: Path, args: list[str], env: dict[str, str], says: str
) -> None:
    scratch = tmp_path / "scratch"
    args = [a.replace("CFG", str(scratch)) for a in args]
    if args[0] == "--config":
        Path(args[1]).parent.mkdir(parents=True)
        Path(args[1]).write_text(
            f'gates = ["{GATE}"]\nopen_mode = true\n'
        )  # a real file, a newline in its path
    done = _cli(
        tmp_path, "service", "install", *args, env={k: v.replace("CFG", str(scratch)) for k, v in env.items()}
    )
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert says in lines[0]
    assert not list(tmp_path.rglob("*.service"))
    assert [str(p) for p in tmp_path.rglob("*.toml")] == (args[1:2] if args[0] == "--config" else [])


def _systemd_analyze_only(home: Path) -> str:
    """A PATH folder holding only systemd-analyze (no systemctl: nothing is started here)."""
    analyze = shutil.which("systemd-analyze")
    if analyze is None:
        pytest.skip("systemd-analyze not found: install Debian's `systemd` package (.ci/deps does)")
    tools = home / "tools"
    tools.mkdir()
    (tools / "systemd-analyze").symlink_to(analyze)
    return str(tools)


def test_install_runs_systemd_analyze_verify_and_writes_nothing_when_it_refuses(tmp_path: Path) -> None:
    """A venv copied without its modes: the `sark-node` script beside the interpreter is not executable.
    systemd would refuse the unit at start; install asks `systemd-analyze verify` first: exit 1."""
    tools = _systemd_analyze_only(tmp_path)
    fine = _cli(tmp_path, "service", "install", "--gate", GATE, "--open", env={"PATH": tools})
    assert fine.returncode == 0, fine.stderr
    unit = tmp_path / "cfg" / "systemd" / "user" / "sark-node.service"
    unit.unlink()
    (tmp_path / "cfg" / "sark-node" / "node.toml").unlink()

    venv = tmp_path / "copied-venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(sys.executable)
    (venv / "sark-node").write_text("#!/bin/sh\n")  # mode 644: not executable
    site = [p for p in sys.path if p.endswith("site-packages")]
    done = _cli(
        tmp_path, "service", "install", "--gate", GATE, "--open", python=str(venv / "python"),
        env={"PATH": tools, "PYTHONPATH": os.pathsep.join([str(ROOT), *site])},
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.startswith("error: systemd-analyze verify refused the unit (nothing written): ")
    assert "not executable" in done.stderr
    assert not unit.exists()
    assert not (tmp_path / "cfg" / "sark-node" / "node.toml").exists()
