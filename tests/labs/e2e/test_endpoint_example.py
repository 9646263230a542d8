"""Issue 41, scope 6 (g): README's endpoint example runs as README writes it, offline.

README's two commands: `examples/serve_llm.py` serves the packaged SmolLM2-135M-Instruct over the
OpenAI API with `transformers serve` and `HF_HUB_OFFLINE=1` (converted once; kept in pytest's cache
here), and `EXAMPLE_API_KEY=none sark-node submit examples/llm-endpoint.yaml --workers 2 ...` (the
console script, a fresh HOME) measures it. The only change to either is the server's port, which the
system picks here (README's 8000 may be taken) and which the campaign's URL then names. The black-box
job gives a Complete row per worker with requests that succeeded; the gray-box job is Unschedulable
(no embedded worker declares a server), as README says. The same submit command against a server
that answers HTTP 500 to every request (the acceptance's broken server) gives Failed rows naming it,
within the job's duration plus the retries' back-off, no figure of 0 ms, and the server's own count.
"""

from __future__ import annotations

import contextlib
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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest
from kit.load import Load, own_core
from kit.procs import SCRIPT, probed
from kit.sse_server import Reply, serve_sse

ROOT = Path(__file__).resolve().parents[3]
README = (ROOT / "README.md").read_text()
RUNNING = re.compile(r"Uvicorn running on http://(127\.0\.0\.1:\d+)")


class Server(NamedTuple):
    """README's model server as the module's tests share it: its host:port and its process id."""

    address: str
    pid: int


ZERO_MS = re.compile(r"(?<![\d.])0(?:\.0+)?\s*ms\b")
PROMPTS = 4  # the black-box job's num_prompts in examples/llm-endpoint.yaml: each worker's requests
BACKOFF_S = 0.5 + 1.0 + 2.0  # the default retry policy's waits after a request's first 500


def _readme_commands() -> tuple[list[str], list[str]]:
    """README's serve command and its submit command (with the variables it sets), as argv lists."""
    block = README.split("```bash\n.venv/bin/python examples/serve_llm.py", 1)[1].split("```", 1)[0]
    serve_line, submit_line = [line for line in block.splitlines() if line.strip()][:2]
    serve = shlex.split(serve_line.split("#", 1)[0].replace("&", ""))
    return ["examples/serve_llm.py", *serve], shlex.split(submit_line)


@pytest.fixture(scope="module")
def server(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
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
            yield Server(found.get(timeout=400), proc.pid)  # the conversion, once: about a minute
        except queue.Empty:
            raise AssertionError("the server did not start:\n" + "".join(log)[-3000:]) from None
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        reader.join(timeout=10)
        if proc.stderr is not None:
            proc.stderr.close()


@pytest.mark.timeout(900)  # a deadline on a loaded machine, not a speed: the first run converts the model
@pytest.mark.parametrize("load", [0, 3], ids=["quiet", "load3-one-core"])
def test_readme_endpoint_example_gives_complete_rows_offline(
    server: Server, tmp_path: Path, load: int
) -> None:
    """Issue 49, scope 4: with three processes of the test's own spinning on one core, the submit and
    the model server there with them (the pressure six on two cores made, while the suite's other
    tests run on the other core: `kit.load`'s `cores`), the server (one request at a time) keeps one
    worker's request waiting behind the other's; the example's count of requests (not a duration)
    lets every one finish, so both rows are Complete."""
    argv, variables = _submit_command()
    _example_against(f"http://{server.address}", tmp_path)
    weather = Load(load, cores=own_core(), joining=[server.pid]) if load else contextlib.nullcontext()
    with weather:  # at load, the device probed already (`kit.procs.probed`): the quiet run is the first start
        done = _submit(argv, variables, tmp_path, probe=bool(load))
    assert done.returncode == 0, done.stderr[-3000:]
    (results,) = (tmp_path / "sark-results").glob("*/results.csv")
    with results.open(newline="") as f:
        rows = list(csv.DictReader(f))
    assert sorted(r["Status"] for r in rows) == ["Complete", "Complete"] + ["Unschedulable"] * 3, rows
    for row in (r for r in rows if r["Status"] == "Complete"):
        assert int(row["Requests"]) > 0, row
        assert row["Errors"] in ("", "0"), row


def _submit_command() -> tuple[list[str], dict[str, str]]:
    """README's submit command as argv, and the variables it sets before it."""
    _, submit = _readme_commands()
    variables = dict(word.split("=", 1) for word in submit if re.fullmatch(r"[A-Z_]+=.*", word))
    argv = [word for word in submit if word not in {f"{k}={v}" for k, v in variables.items()}]
    assert argv[0] == ".venv/bin/sark-node"
    assert variables == {"EXAMPLE_API_KEY": "none"}  # the key variable its black-box job names
    return argv, variables


def _example_against(root: str, tmp_path: Path) -> None:
    """The examples folder copied, its campaign's server (README's 127.0.0.1:8000) at `root`."""
    shutil.copytree(ROOT / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("hub"))
    campaign = tmp_path / "examples" / "llm-endpoint.yaml"
    campaign.write_text(campaign.read_text().replace("http://127.0.0.1:8000", root))


def _submit(
    argv: list[str], variables: dict[str, str], tmp_path: Path, *, probe: bool = False
) -> subprocess.CompletedProcess[str]:
    """README's submit command in `tmp_path` with a fresh HOME, as the console script; with `probe`,
    the device's facts and units from the run's probe (`kit.procs.probed`)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SARK_", "XDG_", "HF_"))}
    env |= {"HOME": str(tmp_path / "home"), **variables}
    env = probed(env) if probe else env
    return subprocess.run(
        [*SCRIPT, *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=540
    )


def test_readme_endpoint_example_against_a_server_that_always_answers_500(tmp_path: Path) -> None:
    at: list[float] = []

    def boom(body: dict[str, object], attempt: int) -> Reply:
        at.append(time.monotonic())
        return Reply(status=500, headers=(("content-type", "application/json"),), pieces=((0.0, b"{}"),))

    argv, variables = _submit_command()
    with serve_sse(boom) as broken:
        _example_against(broken.url, tmp_path)
        done = _submit(argv, variables, tmp_path)
        received = len([s for s in broken.seen if s.path.endswith("/chat/completions")])
    assert done.returncode == 1, done.stderr[-3000:]  # a task failed
    assert at, "the broken server saw no request"
    assert at[-1] - at[0] <= PROMPTS * BACKOFF_S + 3.0  # the job's own time, never a lease's
    (out,) = (tmp_path / "sark-results").glob("*/")
    with (out / "results.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    failed = [r for r in rows if r["Status"] == "Failed"]
    assert sorted(r["Status"] for r in rows) == ["Failed", "Failed"] + ["Unschedulable"] * 3, rows
    counted = 0
    for row in failed:
        assert row["FailureReason"] == "server", row
        assert re.match(r"all \d+ requests failed: HTTP 500 x\d+; the server received \d+", row["Detail"]), (
            row
        )
        counted += int(re.search(r"the server received (\d+)", row["Detail"]).group(1))  # type: ignore[union-attr]
    assert counted == received  # the server's own count, retries included
    terminal = done.stdout + done.stderr
    assert "HTTP 500" in terminal
    for name in ("results.csv", "results.json", "report.html"):
        text = (out / name).read_text()
        assert not ZERO_MS.search(text), (name, ZERO_MS.search(text))
    assert not ZERO_MS.search(terminal), ZERO_MS.search(terminal)
