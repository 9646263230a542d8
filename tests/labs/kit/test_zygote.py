"""The labs' fork server (`kit.zygote`): a `sark-node` a lab starts is a fork of one process that
imported py-libp2p and the node's own modules once, and is otherwise the process `python -P -c CODE`
would be: the caller's argv, environment, working directory, session, streams and CPU affinity, its own
exit code.

What makes the labs cheaper is pinned here as its cause, never as a time: the child's first line finds
the preloads already imported (a fresh interpreter finds none of them), and its parent is the server.
Without the server (`SARK_KIT_FRESH=1`) the same commands start fresh, as before it.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kit import zygote
from kit.campaignlab import paced_env
from kit.netns import H1, H2, NetLab
from kit.procs import SARK, Lab

SEEN = """
import json, os, sys, tempfile
print(json.dumps({
    "temp": tempfile.gettempdir(),
    "preloaded": [name for name in sys.argv[1:] if name in sys.modules],
    "argv": sys.argv, "cwd": os.getcwd(), "env": os.environ.get("ZYGOTE_TEST"),
    "parent": os.getppid(), "session": os.getsid(0) == os.getpid(), "me": os.getpid(),
    "sitecustomize": getattr(sys.modules.get("sitecustomize"), "__file__", None),
    "cpus": sorted(os.sched_getaffinity(0)),
}), flush=True)
"""
WATCHED = ["libp2p", "trio", "node.cli", "node.p2p.node", "node.submitter.run", "gate", "torch"]


@pytest.fixture(autouse=True)
def _served(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are the server's own: they run it even in a run that turned it off (a baseline)."""
    monkeypatch.delenv(zygote.OFF, raising=False)


def _seen(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    assert done.returncode == 0, done.stderr
    seen: dict[str, object] = json.loads(done.stdout)
    return seen


def test_a_forked_child_starts_with_the_node_imported_and_the_callers_settings(tmp_path: Path) -> None:
    argv = [*zygote.PYTHON_C, SEEN, *WATCHED]
    env = {**os.environ, "ZYGOTE_TEST": "mine"}
    seen = _seen(zygote.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path))
    assert seen["preloaded"] == WATCHED[:-1]  # the node's imports done; no runtime
    assert seen["argv"] == ["-c", *WATCHED]
    assert seen["cwd"] == str(tmp_path)
    assert seen["env"] == "mine"
    assert seen["parent"] != os.getpid()  # the server's child, not ours
    fresh = subprocess.run(argv, capture_output=True, text=True, timeout=120, env=env, cwd=tmp_path)
    assert _seen(fresh)["preloaded"] == []  # what a plain start pays for itself


def test_each_child_reads_its_own_temporary_folder_not_its_servers(tmp_path: Path) -> None:
    """TMPDIR is no interpreter setting: children with different ones share a server, and each one's
    temporary files go where its own TMPDIR says (a server that kept the first caller's wrote every
    later child's files into that caller's folder)."""
    argv = [*zygote.PYTHON_C, SEEN]
    seen = []
    for name in ("first", "second"):
        (tmp_path / name).mkdir()
        env = {**os.environ, "TMPDIR": str(tmp_path / name)}
        seen.append(_seen(zygote.run(argv, capture_output=True, text=True, timeout=120, env=env)))
    assert [s["temp"] for s in seen] == [str(tmp_path / "first"), str(tmp_path / "second")]
    assert seen[0]["parent"] == seen[1]["parent"]  # one server


def test_a_child_runs_on_the_callers_cores(tmp_path: Path) -> None:
    """A spawned process inherits its parent's CPU affinity, and so does a forked one: a lab that keeps
    its load and its nodes on one core (`kit.load.Load`'s `cores`) keeps its forked nodes there too."""
    argv = [*zygote.PYTHON_C, SEEN]
    everyone = sorted(os.sched_getaffinity(0))
    os.sched_setaffinity(0, everyone[-1:])
    try:
        seen = _seen(zygote.run(argv, capture_output=True, text=True, timeout=120))
    finally:
        os.sched_setaffinity(0, everyone)
    assert seen["cpus"] == everyone[-1:]
    assert _seen(zygote.run(argv, capture_output=True, text=True, timeout=120))["cpus"] == everyone


NET_SEEN = """
import json, socket, sys, time
probe = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
probe.connect((sys.argv[1], 9))  # no packet is sent: the route decides the address
names = sorted(name for _, name in socket.if_nameindex())
print(json.dumps({"address": probe.getsockname()[0], "interfaces": names}), flush=True)
time.sleep(float(sys.argv[2]))
"""


@pytest.mark.netns
def test_a_child_forked_into_a_lab_namespace_has_that_namespaces_network(net: NetLab, tmp_path: Path) -> None:
    """A node a lab starts in a namespace is forked too: it joins the namespace (`ip netns exec`'s
    network), so it has the lab host's address and interfaces, and the lab's `down` finds it there."""
    lab = Lab(tmp_path)
    try:
        inside = lab.start("h1", [*zygote.PYTHON_C, NET_SEEN, H2, "60"], ns=net.h1)
        assert isinstance(inside.popen, zygote.Forked)
        seen = json.loads(inside.lines.get(timeout=60))
        assert seen == {"address": H1, "interfaces": ["eth0", "lo"]}, seen
        listed = subprocess.run(["ip", "netns", "pids", net.h1], capture_output=True, text=True, check=True)
        assert str(inside.popen.pid) in listed.stdout.split()
    finally:
        lab.close()
    ran = zygote.run(
        [*zygote.PYTHON_C, NET_SEEN, H1, "0"], capture_output=True, text=True, timeout=60, netns=net.h2
    )
    assert json.loads(ran.stdout)["address"] == H2, ran.stderr
    nowhere = zygote.popen([*zygote.PYTHON_C, "pass"], stderr=subprocess.PIPE, netns="zygote-no-such-ns")
    assert nowhere.wait(timeout=60) == 127
    with nowhere.stderr:
        assert "no network namespace zygote-no-such-ns" in nowhere.stderr.read()


def test_without_the_server_every_process_starts_fresh(monkeypatch: pytest.MonkeyPatch) -> None:
    argv = [*zygote.PYTHON_C, SEEN, *WATCHED]
    assert zygote.forkable(argv)
    assert zygote.forkable(SARK)
    assert not zygote.forkable([sys.executable, "-c", SEEN])  # only `python -P -c` is forked
    monkeypatch.setenv(zygote.OFF, "1")
    assert not zygote.forkable(argv)
    assert _seen(zygote.run(argv, capture_output=True, text=True, timeout=120))["preloaded"] == []


def test_a_different_interpreter_setting_gets_its_own_server(tmp_path: Path) -> None:
    """The labs' pacing hook is a `sitecustomize` on PYTHONPATH, read as an interpreter starts: a paced
    worker is forked from a server started with it, an unpaced one from one without."""
    argv = [*zygote.PYTHON_C, SEEN]
    paced = _seen(zygote.run(argv, capture_output=True, text=True, timeout=120, env=paced_env(10.0)))
    plain = _seen(zygote.run(argv, capture_output=True, text=True, timeout=120))
    assert str(paced["sitecustomize"]).endswith("pacing/sitecustomize.py"), paced
    assert plain["sitecustomize"] is None or "pacing" not in str(plain["sitecustomize"])
    assert paced["parent"] != plain["parent"]


def test_exit_codes_signals_streams_and_sessions_are_a_popens() -> None:
    run = zygote.run
    assert run([*zygote.PYTHON_C, "import sys; sys.exit(3)"], text=True, timeout=60).returncode == 3
    failed = run([*zygote.PYTHON_C, "raise ValueError('x')"], capture_output=True, text=True, timeout=60)
    assert failed.returncode == 1
    assert failed.stderr.rstrip().endswith("ValueError: x"), failed.stderr
    echo = "import sys; print(sys.stdin.read().upper(), end='')"
    assert run([*zygote.PYTHON_C, echo], input="abc", capture_output=True, text=True).stdout == "ABC"
    with pytest.raises(subprocess.TimeoutExpired):
        run([*zygote.PYTHON_C, "import time; time.sleep(60)"], text=True, timeout=0.5)
    with pytest.raises(FileNotFoundError):
        zygote.popen([*zygote.PYTHON_C, "pass"], cwd="/nonexistent/folder")
    sleeper = zygote.popen([*zygote.PYTHON_C, "import time; time.sleep(60)"], start_new_session=True)
    assert sleeper.poll() is None
    os.killpg(sleeper.pid, signal.SIGKILL)  # its own session and group, there as soon as it is returned
    assert sleeper.wait(timeout=30) == -signal.SIGKILL


def test_a_child_that_timed_out_gives_what_it_printed(tmp_path: Path) -> None:
    """`communicate` after a timeout and a kill gives the output read so far, as `Popen`'s does (and
    `zygote.run`'s TimeoutExpired carries it: a stuck lab's evidence)."""
    said = tmp_path / "said"
    stuck = "import sys, time; print('here'); print('there', file=sys.stderr); sys.stdout.flush(); "
    stuck += f"open({str(said)!r}, 'w').close(); time.sleep(600)"
    child = zygote.popen([*zygote.PYTHON_C, stuck], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    while not said.exists() and child.poll() is None:
        time.sleep(0.05)
    with pytest.raises(subprocess.TimeoutExpired):
        child.communicate(timeout=0.1)
    child.kill()
    assert child.communicate(timeout=60) == ("here\n", "there\n")


def test_a_lab_forks_its_nodes_unless_asked_fresh(tmp_path: Path) -> None:
    lab = Lab(tmp_path)
    try:
        forked = lab.start("forked", [*zygote.PYTHON_C, SEEN, *WATCHED])
        fresh = lab.start("fresh", [*zygote.PYTHON_C, SEEN, *WATCHED], fresh=True)
        assert isinstance(forked.popen, zygote.Forked)
        assert isinstance(fresh.popen, subprocess.Popen)
        seen = {p.name: json.loads(p.wait_line("{", timeout=120)) for p in (forked, fresh)}
        assert seen["forked"]["preloaded"] == WATCHED[:-1]
        assert seen["forked"]["session"]
        assert seen["fresh"]["preloaded"] == []
        assert seen["fresh"]["parent"] == os.getpid()
        assert forked.popen.wait(timeout=60) == 0
    finally:
        lab.close()
