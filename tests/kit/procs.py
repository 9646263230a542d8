"""Start `sark-node` processes on loopback and read their JSON event lines (no sleeps, every wait bounded)."""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kit import zygote

SARK = [sys.executable, "-P", "-c", "from node.cli import main; main()"]
"""`sark-node` as the console script runs it: `-P` keeps the working directory off `sys.path`, so a
lab folder named like a package (a gate's data folder `gate/`) cannot shadow it."""
SCRIPT = [str(Path(sys.executable).parent / "sark-node")]
"""The console script itself, as README's commands run it (`.venv/bin/sark-node`): for the tests that
check what a user's command does, working directory and all."""
LOOPBACK = "/ip4/127.0.0.1/tcp/0"


def user_env(home: Path) -> dict[str, str]:
    """This process's environment as a new user's: no SARK_ or XDG_ setting, a fresh HOME."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SARK_", "XDG_"))}
    return env | {"HOME": str(home)}


def probed(env: dict[str, str]) -> dict[str, str]:
    """`env` with the run's device probe (`SARK_PROBE_CACHE`, tests/conftest.py): the facts and units
    the suite's first `sark-node` found on this machine, as a user's second start finds its own. For a
    lab under a load of its own whose point is not the first start: a fresh probe imports every runtime
    and runs a tiny model on each, at a fifth of a core a long while of the lab's spinners (README's
    verification at load 4, alone: its campaign began at 61.1 s fresh, 37.9 s so). The calibration is
    still taken in the fresh HOME (`drivers.probe.cache`)."""
    shared = os.environ.get("SARK_PROBE_CACHE")
    return env if shared is None else env | {"SARK_PROBE_CACHE": shared}


@dataclass
class Proc:
    """One running `sark-node` process and the events it printed."""

    name: str
    popen: subprocess.Popen[str] | zygote.Forked
    events: queue.Queue[dict[str, Any]] = field(default_factory=queue.Queue)
    lines: queue.Queue[str] = field(default_factory=queue.Queue)
    ready: dict[str, Any] = field(default_factory=dict)
    reader: threading.Thread | None = None
    log: Path | None = None

    def wait_event(self, kind: str, timeout: float) -> dict[str, Any]:
        """The next event of a kind, or AssertionError after `timeout` seconds."""
        while True:
            try:
                event = self.events.get(timeout=timeout)
            except queue.Empty:
                why = f"{self.name}: no {kind!r} event within {timeout} s\n{self.log_excerpt()}"
                raise AssertionError(why) from None
            if event.get("event") == kind:
                return event

    def wait_line(self, prefix: str, timeout: float) -> str:
        """The next stdout line that starts with `prefix` (a command that prints for people), or
        AssertionError after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                why = f"{self.name}: no line starting {prefix!r} within {timeout} s\n{self.log_excerpt()}"
                raise AssertionError(why) from None
            if line.startswith(prefix):
                return line

    def log_excerpt(self, lines: int = 12) -> str:
        """The first and last lines of its stderr: the first warning is often the cause, the end the
        effect (a traceback alone hides it)."""
        if self.log is None or not self.log.exists():
            return ""
        text = self.log.read_text(errors="replace").splitlines()
        if len(text) <= 2 * lines:
            return "\n".join(text)
        return "\n".join([*text[:lines], f"[... {len(text) - 2 * lines} lines ...]", *text[-lines:]])

    def last_said(self, lines: int = 15) -> str:
        """Its last stdout lines (events, each timed on the monotonic clock) and its stderr excerpt:
        where a process was when a lab gave up on it."""
        trail = self.log.with_suffix(".stdout") if self.log is not None else None
        said = trail.read_text(errors="replace").splitlines()[-lines:] if trail and trail.exists() else []
        return "\n".join([f"{self.name} (now {time.monotonic():.3f}):", *said, self.log_excerpt()])


class Lab:
    """Gates and workers as child processes in their own sessions; `close()` kills them all."""

    def __init__(self, root: Path, *, record_ttl: float = 300.0) -> None:
        self.root = root
        self.record_ttl = record_ttl
        self.procs: list[Proc] = []

    def start(
        self,
        name: str,
        argv: list[str],
        *,
        ns: str | None = None,
        stdin: bool = False,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        fresh: bool = False,
    ) -> Proc:
        """Start any command (in network namespace `ns` if given) and read its JSON event lines.

        With `stdin`, the process gets a pipe on stdin (`proc.popen.stdin`); otherwise /dev/null.
        `env` replaces this process's environment (PYTHONUNBUFFERED is always set); `cwd` is its
        working directory (the lab's root if not given: a `submit` without `--out` writes its
        `sark-results/` there, not into the checkout the suite runs from). A `sark-node` is forked
        from the kit's fork server (`kit.zygote`), in `ns` too, unless `fresh` (a lab that reads the
        process's own memory maps).
        """
        env = {**(os.environ if env is None else env), "PYTHONUNBUFFERED": "1"}
        cwd = self.root if cwd is None else cwd
        log = self.root / f"{name}.stderr"
        with log.open("w") as err:
            streams = {"stdin": subprocess.PIPE if stdin else subprocess.DEVNULL, "stdout": subprocess.PIPE}
            popen: subprocess.Popen[str] | zygote.Forked
            if not fresh and zygote.forkable(argv):
                popen = zygote.popen(
                    argv, **streams, stderr=err, env=env, cwd=cwd, start_new_session=True, netns=ns
                )
            else:
                wrap = ["ip", "netns", "exec", ns] if ns else []
                popen = subprocess.Popen(
                    [*wrap, *argv], **streams, stderr=err, text=True, start_new_session=True, env=env, cwd=cwd
                )
        proc = Proc(name, popen, log=log)
        proc.reader = threading.Thread(target=_pump, args=(proc,), daemon=True)
        proc.reader.start()
        self.procs.append(proc)
        return proc

    def _start(self, name: str, args: list[str], ns: str | None = None) -> Proc:
        return self.start(name, [*SARK, *args], ns=ns)

    def gate(
        self,
        name: str = "gate",
        timeout: float = 30.0,
        *,
        listen: str = LOOPBACK,
        ns: str | None = None,
        extra: Sequence[str] = (),
    ) -> Proc:
        """Start a gate (`extra`: more of its flags) and wait for its ready line."""
        proc = self._start(
            name,
            [
                "gate",
                "--listen",
                listen,
                "--data-dir",
                str(self.root / name),
                "--record-ttl",
                str(self.record_ttl),
                "--events",
                *extra,
            ],
            ns,
        )
        proc.ready = proc.wait_event("ready", timeout)
        return proc

    def worker(
        self,
        name: str,
        gates: list[str],
        profile: Path,
        timeout: float = 30.0,
        *,
        listen: str = LOOPBACK,
        ns: str | None = None,
        wait: bool = True,
        record_ttl: float | None = None,
    ) -> Proc:
        """Start a `join` worker; with `wait`, wait for its ready line (its first advert is out).

        `record_ttl`: its adverts' lifetime (the lab's if None). A worker that must stay listed keeps
        the lab's long one, so its listing never races its own republish on a starved machine; one
        whose expiry is the point gets a short one, and only its signed advert runs out."""
        args = [
            "join",
            "--listen",
            listen,
            "--data-dir",
            str(self.root / name),
            "--profile",
            str(profile),
            "--record-ttl",
            str(self.record_ttl if record_ttl is None else record_ttl),
            "--events",
        ]
        for gate in gates:
            args += ["--gate", gate]
        proc = self._start(name, args, ns)
        if wait:
            proc.ready = proc.wait_event("ready", timeout)
        return proc

    def peers(self, gates: list[str], timeout: float = 30.0) -> list[dict[str, Any]]:
        """Run `sark-node peers --json` once and return its peers."""
        args = [*SARK, "peers", "--json", "--data-dir", str(self.root / f"peers-{len(self.procs)}")]
        for gate in gates:
            args += ["--gate", gate]
        out = zygote.run(args, capture_output=True, text=True, timeout=timeout)
        assert out.returncode == 0, f"peers exited {out.returncode}: {out.stderr[-4000:]}"
        peers: list[dict[str, Any]] = json.loads(out.stdout.strip().splitlines()[-1])["peers"]
        return peers

    def kill(self, proc: Proc) -> None:
        """SIGKILL a process group, reap it and close its pipes. A group already gone (the process exited
        by itself, and its exit was not heard yet) is reaped and closed all the same."""
        if proc.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait(timeout=10)
        if proc.reader is not None:
            proc.reader.join(timeout=10)
        for pipe in (proc.popen.stdout, proc.popen.stdin):
            if pipe is not None:
                with contextlib.suppress(OSError):
                    pipe.close()

    def close(self) -> None:
        """Kill every process this lab started."""
        for proc in self.procs:
            self.kill(proc)


def _pump(proc: Proc) -> None:
    """Queue each JSON event line; keep every stdout line, timed, beside the stderr log."""
    assert proc.popen.stdout is not None
    trail = proc.log.with_suffix(".stdout") if proc.log is not None else Path(os.devnull)
    with trail.open("a") as out:
        for line in proc.popen.stdout:
            out.write(f"{time.monotonic():.3f} {line}")
            out.flush()
            proc.lines.put(line.rstrip("\n"))
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if isinstance(event, dict):
                proc.events.put(event)
