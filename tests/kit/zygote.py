"""A fork server for the labs' `sark-node` processes: started once, it imports what every node
imports (py-libp2p 0.8.1 alone about 0.85 CPU-s: its `__init__` pulls in QUIC, autotls and DNS; then
the CLI and our packages, whose pydantic models are built at import), and forks one child for each
node a lab starts.

    proc = procs.Lab(root).start("gate", [*SARK, "gate", ...])    # a fork of this file's server
    done = zygote.run([*SARK, "submit", ...], capture_output=True, text=True, timeout=60)

A lab run starts some 400 node processes; each paid those imports anew, about 1 of its CPU-seconds
(a `peers` that finds no gate: 1.05 CPU-s started fresh, 0.2 forked). A forked child is the process
`python -P -c CODE` would be from the point those imports end: its argv (`-c` and its arguments),
environment, working directory, session, standard streams and CPU affinity are the caller's; its interpreter
settings (`PYTHON*` variables, locale, the labs' pacing hook on PYTHONPATH, `SARK_LAB_*`) are its
server's, which is started with the caller's; it runs CODE in `__main__` and ends as any interpreter
does (its exit code, atexit, a traceback). Nothing imported reads its environment at import time
(the one value the server keeps, its temporary folder, each child forgets), so a child reads its own
when it runs.

The caller holds a `Forked` where it held a `subprocess.Popen` (pid, stdin, stdout, poll, wait,
send_signal, terminate, kill, communicate). The server reaps its children and sends each exit status
back on the socket it serves; it exits when its caller closes that socket or dies.

Only `[this Python, -P, -c, CODE, ...]` is forked (in a lab's network namespace too: the child joins
it, `_enter`); anything else, a start with `fresh=True` (a lab that reads the process's own memory
maps), or every start with `SARK_KIT_FRESH=1` is a plain `subprocess.Popen`. One server per distinct
set of interpreter settings, per test process. tests/labs/kit/test_zygote.py pins it.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import queue
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Final

PRELOADS: Final = (
    "libp2p", "trio", "multiaddr", "pydantic", "httpx", "typer", "yaml", "psutil", "platformdirs", "msgpack",
    "numpy", "matplotlib", "matplotlib.figure", "matplotlib.backends.backend_svg", "matplotlib.colors",
    "matplotlib.ticker",
    "node.cli", *(f"node.cli.{topic}" for topic in ("local", "swarm", "owner", "campaign", "stored", "report",
    "proof", "serve", "service", "schema")), "node.config", "node.p2p.node", "node.worker.role",
    "node.submitter.run", "gate",
)  # fmt: skip
"""What the server imports before it forks, as the nodes import it: py-libp2p and the packages it
and the CLI stand on; numpy and matplotlib, which every `submit` and `report` draws report.html with
(0.55 CPU-s of imports each); and the modules of ours behind `join`, `gate`, `submit` and the views
(each reads its environment when it runs, never as it is imported; `node.cli` registers its commands
when `main` runs). Not the runtimes or the measuring child: those start in the child, under the labs'
pacing hook where it is set. matplotlib reads its configuration folder as it is imported: the server's
is `MPLCONFIG` (the font cache built once for the suite), not the child's HOME."""
MPLCONFIG: Final = Path(tempfile.gettempdir()) / f"sark-kit-matplotlib-{os.getuid()}"
KEYS: Final = ("LANG", "LC_ALL", "LC_CTYPE", "TZ", "LIBP2P_BIND", "LIBP2P_BIND_V6")
"""Variables besides `PYTHON*` and `SARK_LAB_*` that an interpreter reads as it starts, or a preload
as it is imported (py-libp2p's default bind addresses): a child whose environment differs in one of
these is forked from a server started with its own."""
PYTHON_C: Final = [sys.executable, "-P", "-c"]
BOOT: Final = (
    "import runpy, sys\n"
    "_code = runpy.run_path(sys.argv.pop(1))['serve'](int(sys.argv.pop(1)))\n"
    "del runpy\n"
    "exec(_code)\n"
)
"""The server's own `-c`: it serves in `serve` until it forks; the child comes back with the CODE it
was asked to run and runs it in `__main__`, as `python -c CODE` does."""
MAX_MESSAGE: Final = 1 << 20


OFF: Final = "SARK_KIT_FRESH"
"""Set to 1 in the test process: every process starts fresh, as without this module (a baseline, or a
failure to tell from the fork server)."""


def forkable(argv: Sequence[str]) -> bool:
    """Whether this command is `python -P -c CODE ...` run by this very Python (and OFF is not set)."""
    return len(argv) >= 4 and list(argv[:3]) == PYTHON_C and os.environ.get(OFF) != "1"


def _key(env: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple(sorted((k, v) for k, v in env.items() if k.startswith(("PYTHON", "SARK_LAB_")) or k in KEYS))


class Forked:
    """A child of the fork server, held as a `subprocess.Popen` is."""

    def __init__(self, args: list[str], pid: int, stdin: Any, stdout: Any, stderr: Any) -> None:
        self.args = args
        self.pid = pid
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.returncode: int | None = None
        self.cpu_s: float | None = None
        """Its CPU time (user and system), once it exited: the server reads it as it reaps the child
        (`os.wait4`), as a fresh child's would be read from this process's own rusage."""
        self._done = threading.Event()
        self._drains: list[threading.Thread] | None = None
        self._read: dict[str, Any] = {}

    def _exited(self, code: int) -> None:
        self.returncode = code
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired(self.args, timeout or 0.0)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def communicate(self, input: str | None = None, timeout: float | None = None) -> tuple[Any, Any]:
        """Write `input`, read stdout and stderr to their ends (each piped one) and wait. After a
        timeout, a second call (the child killed) gives what the first one read, as `Popen`'s does."""
        if self._drains is None:
            self._drains = [
                threading.Thread(target=self._drain, args=(name, f), daemon=True)
                for name, f in (("out", self.stdout), ("err", self.stderr))
                if f is not None
            ]
            for thread in self._drains:
                thread.start()
            if self.stdin is not None:
                with contextlib.suppress(BrokenPipeError):
                    if input:
                        self.stdin.write(input)
                    self.stdin.close()
        self.wait(timeout)
        for thread in self._drains:
            thread.join(timeout)
        return self._read.get("out"), self._read.get("err")

    def _drain(self, name: str, f: Any) -> None:
        with f:
            self._read[name] = f.read()


class Zygote:
    """One fork server and the children it forked for this process."""

    def __init__(self, env: Mapping[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self._sock = ours
        self._lock = threading.Lock()
        self._started: queue.Queue[Forked | None] = queue.Queue()
        self._children: dict[int, Forked] = {}
        self._server = subprocess.Popen(
            [*PYTHON_C, BOOT, __file__, str(theirs.fileno())],
            pass_fds=[theirs.fileno()],
            env={**env, "MPLCONFIGDIR": str(MPLCONFIG)},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
        )
        theirs.close()
        threading.Thread(target=self._read, daemon=True).start()
        if self._started.get(timeout=120) is None:
            raise OSError(f"the fork server did not start: it exited {self._server.wait()}")

    def _read(self) -> None:
        while True:
            try:
                message = self._sock.recv(MAX_MESSAGE)
            except OSError:
                message = b""
            if not message:
                break
            answer = json.loads(message)
            if "exit" in answer:
                child = self._children.pop(answer["pid"])
                child.cpu_s = answer["cpu"]
                child._exited(answer["exit"])
            else:  # the server ready, or a child started: known before its exit can be read
                child = Forked([], answer["pid"], None, None, None)
                if "ready" not in answer:
                    self._children[child.pid] = child
                self._started.put(child)
        self._started.put(None)
        for child in list(self._children.values()):  # the server is gone: no status will come
            child._exited(-signal.SIGKILL)

    def fork(self, request: dict[str, Any], fds: list[int]) -> Forked:
        """Fork a child for `request` (`_request`) with these standard streams (`fds`, sent)."""
        with self._lock:
            socket.send_fds(self._sock, [json.dumps(request).encode()], fds)
            child = self._started.get(timeout=60)
        if child is None:
            raise OSError(f"the fork server exited {self._server.poll()}")
        return child

    def close(self) -> None:
        self._sock.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self._server.wait(timeout=10)


_zygotes: dict[tuple[tuple[str, str], ...], Zygote] = {}
_zygotes_lock = threading.Lock()


def _zygote(env: Mapping[str, str]) -> Zygote:
    with _zygotes_lock:
        key = _key(env)
        if key not in _zygotes:
            _zygotes[key] = Zygote(env)
        return _zygotes[key]


@atexit.register
def _close_all() -> None:
    for zygote in _zygotes.values():
        zygote.close()


def popen(
    argv: list[str],
    *,
    stdin: Any = None,
    stdout: Any = None,
    stderr: Any = None,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    start_new_session: bool = False,
    netns: str | None = None,
) -> Forked:
    """`subprocess.Popen(argv, text=True, ...)` for a `forkable` argv, forked from the server.

    `stdin`, `stdout`, `stderr`: `subprocess.PIPE`, `subprocess.DEVNULL`, an open file, or None (this
    process's own). `netns`: the child runs in that named network namespace (`ip netns exec NETNS
    argv`'s network: its interfaces, addresses and routes; `_enter`)."""
    env = dict(os.environ if env is None else env)
    if cwd is not None and not os.path.isdir(cwd):
        raise FileNotFoundError(f"no such directory: {cwd}")
    ends: list[int] = []
    mine: list[Any] = []
    opened: list[int] = []
    for number, how in enumerate((stdin, stdout, stderr)):
        if how == subprocess.PIPE:
            r, w = os.pipe()
            theirs, keep = (r, w) if number == 0 else (w, r)
            ends.append(theirs)
            opened.append(theirs)
            raw = open(keep, "wb" if number == 0 else "rb")  # noqa: SIM115 (the caller's to close)
            mine.append(io.TextIOWrapper(raw, write_through=True) if number == 0 else io.TextIOWrapper(raw))
            continue
        if how == subprocess.DEVNULL:
            fd = os.open(os.devnull, os.O_RDWR)
            opened.append(fd)
        elif how is None:
            fd = number
        else:
            fd = how.fileno() if hasattr(how, "fileno") else int(how)
        ends.append(fd)
        mine.append(None)
    try:
        child = _zygote(env).fork(_request(argv, env, cwd, start_new_session, netns), ends)
    finally:
        for fd in opened:
            os.close(fd)
    child.args = list(argv)
    child.stdin, child.stdout, child.stderr = mine
    return child


RUN_KWARGS: Final = frozenset({"capture_output", "text", "timeout", "env", "cwd", "input", "check"})


def run(argv: list[str], *, netns: str | None = None, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """`subprocess.run(argv, **kwargs)` (in network namespace `netns`: `ip netns exec NETNS argv`),
    forked from the server where `argv` is `forkable`, the output text and the arguments among
    RUN_KWARGS; a plain `subprocess.run` otherwise."""
    if not (forkable(argv) and kwargs.get("text") and set(kwargs) <= RUN_KWARGS):
        return subprocess.run([*(["ip", "netns", "exec", netns] if netns else []), *argv], **kwargs)
    pipe = subprocess.PIPE if kwargs.get("capture_output") else None
    child = popen(
        argv,
        stdin=subprocess.PIPE if kwargs.get("input") is not None else None,
        stdout=pipe,
        stderr=pipe,
        env=kwargs.get("env"),
        cwd=kwargs.get("cwd"),
        netns=netns,
    )
    try:
        out, err = child.communicate(kwargs.get("input"), timeout=kwargs.get("timeout"))
    except subprocess.TimeoutExpired as exc:
        child.kill()
        exc.stdout, exc.stderr = child.communicate(timeout=30)  # what it printed: the evidence
        raise
    done = subprocess.CompletedProcess(argv, child.wait(), out, err)
    if kwargs.get("check"):
        done.check_returncode()
    return done


def _request(
    argv: Sequence[str], env: Mapping[str, str], cwd: str | Path | None, session: bool, netns: str | None
) -> dict[str, Any]:
    return {
        "netns": netns,
        "code": argv[3],
        "args": list(argv[4:]),
        "env": dict(env),
        "cwd": str(cwd if cwd is not None else os.getcwd()),
        "session": session,
        "cpus": sorted(os.sched_getaffinity(0)),  # as a spawned child inherits them (`kit.load`'s cores)
    }


# ---- the server's side: runs in the fork server process (BOOT), stdlib and PRELOADS only ----


def serve(fd: int) -> str:
    """Import PRELOADS, then fork a child per request; in the child, return the CODE it is to run."""
    import gc
    import importlib

    for name in PRELOADS:
        importlib.import_module(name)
    gc.freeze()  # what was imported stays out of each child's collections (and its pages unwritten)
    sock = socket.socket(fileno=fd)
    sock.send(json.dumps({"pid": os.getpid(), "ready": True}).encode())
    with selectors.DefaultSelector() as selector:
        selector.register(sock, selectors.EVENT_READ, None)
        while True:
            for key, _ in selector.select():
                if key.data is not None:
                    _reap(sock, selector, key.fd, key.data)
                    continue
                message, fds, _, _ = socket.recv_fds(sock, MAX_MESSAGE, 3)
                if not message:
                    os._exit(0)
                request = json.loads(message)
                settled, told = os.pipe()
                pid = os.fork()
                if pid == 0:
                    for other in list(selector.get_map().values()):
                        if other.data is not None:
                            os.close(other.fd)
                    selector.close()
                    sock.close()
                    os.close(settled)
                    code = _become(request, fds)
                    os.close(told)
                    return code
                for received in (*fds, told):
                    os.close(received)
                os.read(settled, 1)  # its session, streams and directory are set, as Popen returns
                os.close(settled)
                selector.register(os.pidfd_open(pid), selectors.EVENT_READ, pid)
                sock.send(json.dumps({"pid": pid}).encode())


def _reap(sock: socket.socket, selector: selectors.BaseSelector, pidfd: int, pid: int) -> None:
    selector.unregister(pidfd)
    os.close(pidfd)
    _, status, usage = os.wait4(pid, 0)
    cpu = usage.ru_utime + usage.ru_stime
    sock.send(json.dumps({"pid": pid, "exit": os.waitstatus_to_exitcode(status), "cpu": cpu}).encode())


def _become(request: dict[str, Any], fds: list[int]) -> str:
    """The child's side: the caller's session, streams, directory, environment and argv."""
    if request["session"]:
        os.setsid()
    for target, fd in enumerate(fds):
        os.dup2(fd, target)
    for fd in fds:
        if fd > 2:
            os.close(fd)
    if request["netns"] is not None:
        _enter(request["netns"])
    os.sched_setaffinity(0, request["cpus"])
    try:
        os.chdir(request["cwd"])
    except OSError as e:
        print(f"fork server: cannot enter {request['cwd']}: {e}", file=sys.stderr, flush=True)
        os._exit(127)
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # read from TMPDIR once, in the server (MPLCONFIG): the child reads its own
    sys.argv[:] = ["-c", *request["args"]]
    code: str = request["code"]
    return code


NETNS_RUN: Final = Path("/run/netns")
"""Where `ip netns add NAME` keeps a namespace's handle (iproute2's NETNS_RUN_DIR)."""
CLONE_NEWNET: Final = 0x40000000


def _enter(name: str) -> None:
    """Join the network namespace `ip netns add NAME` made, as `ip netns exec` does for its command's
    network (setns(2) on its handle); not its remount of /sys, which no node reads. A child that
    cannot enter it exits 127, as `ip netns exec` does for a namespace that is not there."""
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    try:
        fd = os.open(NETNS_RUN / name, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as e:
        print(f"fork server: no network namespace {name}: {e}", file=sys.stderr, flush=True)
        os._exit(127)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        why = os.strerror(ctypes.get_errno())
        print(f"fork server: cannot enter {name}: {why}", file=sys.stderr, flush=True)
        os._exit(127)
    os.close(fd)
