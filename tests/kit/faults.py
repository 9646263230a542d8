"""Fault injection for the labs: kill9, stop/cont, cgroup freeze/thaw, partition/heal, loss, delay, tbf.

Every fault that leaves something behind registers its undo; `Faults.undo_all()` (or leaving the
`with` block) runs them in reverse order and never raises, and stopped or frozen processes are
continued or thawed before anything kills them (shared/notes/faults-and-security.md §5, §7).
netem does not exist on this kernel: loss is an nft `numgen random` drop, a partition is an nft drop
in the bridge namespace, bandwidth is `tc tbf`, delay is the NFQUEUE shim `netdelay.py`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from kit.netns import NetLab
from kit.procs import Proc

NETDELAY = str(Path(__file__).resolve().parent / "netdelay.py")
_V1_FREEZER = Path("/sys/fs/cgroup/freezer")
_V2_ROOT = next(
    (p for p in (Path("/sys/fs/cgroup"), Path("/sys/fs/cgroup/unified")) if (p / "cgroup.procs").exists()),
    Path("/sys/fs/cgroup"),
)  # a pure v2 machine mounts it at /sys/fs/cgroup; a hybrid one (this lab) under unified/


def group_pids(pgid: int) -> list[int]:
    """Every live process in a process group (a worker and its measurement child)."""
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if int(fields[2]) == pgid:  # fields after the command: state, ppid, pgrp
            pids.append(int(entry.name))
    return pids


def _nft(ns: str, rules: str) -> None:
    subprocess.run(
        ["ip", "netns", "exec", ns, "nft", "-f", "-"], input=rules, text=True, check=True, timeout=30,
        capture_output=True,
    )  # fmt: skip


def _quiet(argv: list[str]) -> None:
    subprocess.run(argv, capture_output=True, check=False, timeout=30)


class Faults:
    """The fault injector of one lab; every fault is undone by `undo_all()`."""

    def __init__(self, net: NetLab | None = None) -> None:
        self.net = net
        self._undo: list[tuple[str, Callable[[], None]]] = []
        self._cgroups: list[Path] = []
        self.log: list[tuple[float, str]] = []

    def __enter__(self) -> Faults:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.undo_all()

    def _note(self, what: str) -> float:
        now = time.time()
        self.log.append((now, what))
        return now

    def _push(self, key: str, undo: Callable[[], None]) -> None:
        self._undo.append((key, undo))

    def _pop(self, key: str) -> None:
        for i in range(len(self._undo) - 1, -1, -1):
            if self._undo[i][0] == key:
                _, undo = self._undo.pop(i)
                undo()
                return

    def undo_all(self) -> None:
        """Undo every fault still in force, newest first; never raises."""
        while self._undo:
            _, undo = self._undo.pop()
            with contextlib.suppress(Exception):
                undo()
        for cgroup in self._cgroups:
            with contextlib.suppress(OSError):
                cgroup.rmdir()
        self._cgroups.clear()

    # -- processes ---------------------------------------------------------------------------------

    def kill9(self, proc: Proc) -> float:
        """SIGKILL the process group (thawed and continued first); returns the wall time."""
        self._release(proc)
        now = self._note(f"kill9 {proc.name}")
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.popen.pid, signal.SIGKILL)
        proc.popen.wait(timeout=10)
        return now

    def sigterm(self, proc: Proc) -> float:
        """SIGTERM the process alone (as systemd's KillMode=mixed does): a graceful leave; returns the wall
        time. Nothing to undo: the process exits by itself."""
        now = self._note(f"sigterm {proc.name}")
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.popen.pid, signal.SIGTERM)
        return now

    def _release(self, proc: Proc) -> None:
        self._pop(f"stop:{proc.popen.pid}")
        self._pop(f"freeze:{proc.popen.pid}")

    def stop(self, proc: Proc) -> float:
        """SIGSTOP the process group until `cont` (or teardown)."""
        pgid = proc.popen.pid
        os.killpg(pgid, signal.SIGSTOP)
        self._push(f"stop:{pgid}", lambda: os.killpg(pgid, signal.SIGCONT))
        return self._note(f"stop {proc.name}")

    def cont(self, proc: Proc) -> float:
        """SIGCONT a stopped process group."""
        self._pop(f"stop:{proc.popen.pid}")
        return self._note(f"cont {proc.name}")

    def freeze(self, proc: Proc) -> float:
        """Freeze the process group in a cgroup of its own (v1 freezer, else v2 `cgroup.freeze`)."""
        pgid = proc.popen.pid
        v1 = _V1_FREEZER.is_dir()
        cgroup = (_V1_FREEZER if v1 else _V2_ROOT) / f"sark-fault-{pgid}"
        cgroup.mkdir(exist_ok=True)
        self._cgroups.append(cgroup)
        for pid in group_pids(pgid):
            with contextlib.suppress(OSError):
                (cgroup / "cgroup.procs").write_text(str(pid))
        state, frozen, thawed = ("freezer.state", "FROZEN", "THAWED") if v1 else ("cgroup.freeze", "1", "0")
        (cgroup / state).write_text(frozen)

        def thaw() -> None:
            (cgroup / state).write_text(thawed)
            parent = cgroup.parent / "cgroup.procs"
            for pid in (cgroup / "cgroup.procs").read_text().split():
                with contextlib.suppress(OSError):
                    parent.write_text(pid)

        self._push(f"freeze:{pgid}", thaw)
        return self._note(f"freeze {proc.name} ({'v1' if v1 else 'v2'})")

    def thaw(self, proc: Proc) -> float:
        """Thaw a frozen process group and move it back to the root cgroup."""
        self._pop(f"freeze:{proc.popen.pid}")
        return self._note(f"thaw {proc.name}")

    # -- network -----------------------------------------------------------------------------------

    def _lab(self) -> NetLab:
        assert self.net is not None, "network faults need the namespace lab"
        return self.net

    def partition(self, ip: str) -> float:
        """Cut one host off the bridge (both directions) with an nft drop in the bridge namespace."""
        sw = self._lab().sw
        table = f"part{ip.replace('.', '')}"
        _nft(sw, f"""\
table bridge {table} {{
  chain brfwd {{
    type filter hook forward priority 0;
    ip saddr {ip} drop
    ip daddr {ip} drop
  }}
}}
""")  # fmt: skip
        self._push(
            f"part:{ip}",
            lambda: _quiet(["ip", "netns", "exec", sw, "nft", "delete", "table", "bridge", table]),
        )
        return self._note(f"partition {ip}")

    def heal(self, ip: str) -> float:
        """Remove the partition of `ip`."""
        self._pop(f"part:{ip}")
        return self._note(f"heal {ip}")

    def loss(self, ns: str, percent: int) -> float:
        """Drop `percent` % of the packets leaving namespace `ns` (nft numgen random)."""
        _nft(ns, f"""\
table inet chaos {{
  chain out {{
    type filter hook output priority 0;
    oifname "eth0" numgen random mod 100 < {percent} counter drop
  }}
}}
""")  # fmt: skip
        self._push(
            f"loss:{ns}",
            lambda: _quiet(["ip", "netns", "exec", ns, "nft", "delete", "table", "inet", "chaos"]),
        )
        return self._note(f"loss {percent}% {ns}")

    def tbf(self, ns: str, rate: str = "8mbit") -> float:
        """Cap the egress bandwidth of namespace `ns` with a token bucket."""
        argv = ["ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", "eth0", "root", "tbf"]
        subprocess.run([*argv, "rate", rate, "burst", "32kbit", "latency", "50ms"], check=True, timeout=30)
        self._push(
            f"tbf:{ns}",
            lambda: _quiet(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "eth0", "root"]),
        )
        return self._note(f"tbf {rate} {ns}")

    def delay(self, ns: str, ms: float, jitter_ms: float = 0.0, *, queue: int = 1) -> float:
        """Delay the TCP packets leaving namespace `ns` by `ms` with the NFQUEUE shim (control traffic).

        The shim runs inside `ns`; `--queue-bypass` lets traffic pass unshaped should the shim die.
        Waits for the shim's `ready` line, so the rule is in force when this returns.
        """
        shim = subprocess.Popen(
            ["ip", "netns", "exec", ns, sys.executable, NETDELAY, str(queue), str(ms), str(jitter_ms)],
            stdout=subprocess.PIPE, text=True, start_new_session=True,
        )  # fmt: skip
        assert shim.stdout is not None
        line = shim.stdout.readline()
        if "ready" not in line:
            shim.kill()
            shim.wait(timeout=10)
            shim.stdout.close()
            raise RuntimeError(f"the NFQUEUE delay shim did not start: {line!r}")
        rule = [
            "OUTPUT",
            "-o",
            "eth0",
            "-p",
            "tcp",
            "-j",
            "NFQUEUE",
            "--queue-num",
            str(queue),
            "--queue-bypass",
        ]
        subprocess.run(["ip", "netns", "exec", ns, "iptables", "-A", *rule], check=True, timeout=30)

        def undo() -> None:
            _quiet(["ip", "netns", "exec", ns, "iptables", "-D", *rule])
            with contextlib.suppress(ProcessLookupError):
                os.killpg(shim.pid, signal.SIGTERM)
            shim.wait(timeout=10)
            if shim.stdout is not None:
                shim.stdout.close()

        self._push(f"delay:{ns}", undo)
        return self._note(f"delay {ms} ms {ns}")
