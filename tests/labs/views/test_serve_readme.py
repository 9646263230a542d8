"""Issue 48: README's `serve` commands, as it writes them.

The block after README's `serve-commands` marker: `sark-node serve --http 127.0.0.1:5000` runs as the
console script with a fresh HOME, its port the only change (5000 may be taken under xdist, as the
fleet lab changes its gate's 4001), and each `curl` line of the block runs as written against it:
the health answer names the swarm (no `--gate`: an embedded one, its gate listed), and the workers
answer counts what discovery has seen. Ctrl-C stops it with its one line.
"""

from __future__ import annotations

import json
import queue
import shlex
import signal
import socket
import subprocess
import threading
from pathlib import Path

from kit.procs import SCRIPT, user_env

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
PORT = "5000"


def _block() -> list[str]:
    lines = README.splitlines()
    at = lines.index("<!-- serve-commands -->")
    assert lines[at + 1] == "```bash"
    return [line.split("  #", 1)[0].strip() for line in lines[at + 2 : lines.index("```", at + 2)]]


def _free_port() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return str(s.getsockname()[1])


def test_readmes_serve_commands_answer_as_written(tmp_path: Path) -> None:
    serve, *curls = _block()
    assert serve == f"sark-node serve --http 127.0.0.1:{PORT}"
    assert curls
    assert all(line.startswith(f"curl http://127.0.0.1:{PORT}/api/") for line in curls)
    port = _free_port()
    argv = [*SCRIPT, *shlex.split(serve.replace(PORT, port))[1:]]
    proc = subprocess.Popen(
        argv, cwd=tmp_path, env=user_env(tmp_path / "home"), stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stderr or ()], daemon=True)
    reader.start()
    try:
        seen = []
        while not any(line.startswith("serving http://127.0.0.1:") for line in seen):
            seen.append(lines.get(timeout=120))
        answers = {}
        for line in curls:
            done = subprocess.run(
                shlex.split(line.replace(PORT, port)), capture_output=True, text=True, timeout=30
            )
            assert done.returncode == 0, (line, done.stderr)
            answers[line.rsplit("/", 1)[1]] = json.loads(done.stdout)
        assert answers["health"]["status"] == "healthy"
        assert len(answers["health"]["swarm"]["gates"]) == 1  # the embedded swarm's own gate
        assert answers["workers"]["count"] == len(answers["workers"]["workers"])
    finally:
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=60)
        reader.join(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()
    rest = []
    while not lines.empty():
        rest.append(lines.get())
    assert code == 130, "".join(seen + rest)[-3000:]
    assert any("stopped serving" in line for line in rest), rest
