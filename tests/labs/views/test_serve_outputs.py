"""Issue 29: a campaign whose files cannot be written fails with its reason; `serve` goes on.

A real `sark-node serve` (embedded swarm) runs a campaign whose report.html cannot be written: a
folder already stands at its path, so renaming the finished file into place fails (an OSError that
is no full disk). The campaign is "failed" with "outputs not written: ..." in its API object, the
two files written before the report are there, `/api/health` answers, and the next campaign runs
and writes its files as usual.
"""

from __future__ import annotations

from pathlib import Path

import httpx

from labs.views.test_http_api import ModelServer, model_server, seeds_body, start_serve

__all__ = ["model_server"]  # the module fixture, shared with test_http_api


def test_a_campaign_whose_files_cannot_be_written_fails_with_why_and_serve_goes_on(
    tmp_path: Path, model_server: ModelServer
) -> None:
    served = start_serve(tmp_path / "serve", "--out", str(tmp_path / "out"))
    try:
        served.wait_event("peers", 60, count=1)
        body = {
            "model_url": model_server.model_url,
            "jobs": [{"compute_unit": "CPU (ONNX)", "num_inference_runs": 10}],
        }
        first = httpx.post(f"{served.api}/campaigns", json=body, timeout=60)
        assert first.status_code == 201, first.text
        cid = first.json()["campaign_id"]
        (tmp_path / "out" / cid / "report.html" / "in the way").mkdir(parents=True)
        failed = served.wait_event("campaign_failed", 120, campaign=cid)
        shown = httpx.get(f"{served.api}/campaigns/{cid}", timeout=30).json()
        assert httpx.get(f"{served.api}/health", timeout=30).status_code == 200
        second = httpx.post(f"{served.api}/campaigns", json=seeds_body(model_server.model_url), timeout=60)
        assert second.status_code == 201, second.text
        done = served.wait_event("campaign_done", 120, campaign=second.json()["campaign_id"])
        assert served.popen.poll() is None
    finally:
        served.stop()
    assert failed["error"].startswith("outputs not written: IsADirectoryError: "), failed
    assert (shown["status"], shown["error"]) == ("failed", failed["error"])
    assert (tmp_path / "out" / cid / "results.csv").is_file()  # written before the report
    assert (tmp_path / "out" / cid / "results.json").is_file()
    assert all(Path(done["files"][k]).is_file() for k in ("csv", "json", "html"))
