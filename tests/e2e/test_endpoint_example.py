"""Issue 41, scope 6 (g): README's endpoint example runs as README writes it, offline.

README's two commands: `examples/serve_llm.py` serves the packaged SmolLM2-135M-Instruct over the
OpenAI API with `transformers serve` and `HF_HUB_OFFLINE=1` (converted once; kept in pytest's cache
here), and `EXAMPLE_API_KEY=none sark-node submit examples/llm-endpoint.yaml --workers 2 ...` (the
console script, a fresh HOME) measures it. The only change to either is the server's port, which the
system picks here (README's 8000 may be taken) and which the campaign's URL then names. The black-box
job gives a Complete row per worker with requests that succeeded; the gray-box job is Unschedulable
(no embedded worker declares a server), as README says.
"""

from __future__ import annotations

import csv
import os
import queue
import re
import shlex
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from lab.procs import SCRIPT

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text()
RUNNING = re.compile(r"Uvicorn running on http://(127\.0\.0\.1:\d+)")


def _readme_commands() -> tuple[list[str], list[str]]:
    """README's serve command and its submit command (with the variables it sets), as argv lists."""
    block = README.split("```bash\n.venv/bin/python examples/serve_llm.py", 1)[1].split("```", 1)[0]
    serve_line, submit_line = [line for line in block.splitlines() if line.strip()][:2]
    serve = shlex.split(serve_line.split("#", 1)[0].replace("&", ""))
    return ["examples/serve_llm.py", *serve], shlex.split(submit_line)


@pytest.fixture(scope="module")
def server(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """README's serve command on a port the system picks; its host:port, read from its own log line."""
    kept = getattr(pytestconfig, "cache", None)
    cache = kept.mkdir("smollm2-hub") if kept is not None else tmp_path_factory.mktemp("smollm2-hub")
    serve, _ = _readme_commands()
    argv = [sys.executable, *serve, "--cache", str(cache), "--host", "127.0.0.1", "--port", "0"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True, env=env, start_new_session=True,
    )  # fmt: skip
    found: queue.Queue[str] = queue.Queue()
    log: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line)
            match = RUNNING.search(line)
            if match:
                found.put(match.group(1))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()
    try:
        try:
            yield found.get(timeout=400)  # the conversion, once: about a minute on two busy cores
        except queue.Empty:
            raise AssertionError("the server did not start:\n" + "".join(log)[-3000:]) from None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        reader.join(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.mark.timeout(900)  # a deadline on a loaded machine, not a speed: the first run converts the model
def test_readme_endpoint_example_gives_complete_rows_offline(server: str, tmp_path: Path) -> None:
    _, submit = _readme_commands()
    variables = dict(word.split("=", 1) for word in submit if re.fullmatch(r"[A-Z_]+=.*", word))
    argv = [word for word in submit if word not in {f"{k}={v}" for k, v in variables.items()}]
    assert argv[0] == ".venv/bin/sark-node"
    assert variables == {"EXAMPLE_API_KEY": "none"}  # the key variable its black-box job names
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("hub"))
    campaign = tmp_path / "examples" / "llm-endpoint.yaml"
    campaign.write_text(campaign.read_text().replace("127.0.0.1:8000", server))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SARK_", "XDG_", "HF_"))}
    env |= {"HOME": str(tmp_path / "home"), **variables}
    done = subprocess.run(
        [*SCRIPT, *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540
    )
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = (tmp_path / "sark-results").glob("*/results.csv")
    with results.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["Status"] for r in rows) == ["Complete", "Complete"] + ["Unschedulable"] * 3, rows
    for row in (r for r in rows if r["Status"] == "Complete"):
        assert int(row["Requests"]) > 0, row
        assert row["Errors"] in ("", "0"), row
