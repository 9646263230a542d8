"""The suite's `exclusive` lock (tests/conftest.py `_cores`): under xdist an exclusive test never runs
beside another test, and two exclusive tests in a row on one worker keep the lock between them, so no
test of the other worker starts in the gap (before, it did, and the second waited for it: 94 s idle
in the CI run at a252ecf).

A pytest run of its own (`pytester`, `-n 2 --dist loadfile`) with the suite's conftest's fixture and
hook: one file of two exclusive tests, one of six shared ones; each test writes when it began and
ended. What is asserted is order, never speed: no shared test's span meets an exclusive one's, and
none lies between the two exclusive tests.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[2] / "conftest.py"

SUITE = f"""
import importlib.util
spec = importlib.util.spec_from_file_location("suiteconf", {str(CONFTEST)!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
_cores = suite._cores
pytest_runtest_protocol = suite.pytest_runtest_protocol

def pytest_configure(config):
    config.addinivalue_line("markers", "exclusive: alone on the cores")
"""

SPAN = """
import json, os, time
def span(log, name, seconds):
    began = time.time()
    time.sleep(seconds)
    with open(log, "a") as f:
        f.write(json.dumps([name, began, time.time()]) + "\\n")
"""


def test_exclusive_tests_in_a_row_keep_the_cores_and_never_meet_a_shared_one(
    pytester: pytest.Pytester,
) -> None:
    pytest.importorskip("xdist")
    log = pytester.path / "spans.jsonl"
    pytester.makeconftest(SUITE)
    pytester.makepyfile(span=SPAN)
    exclusive = "\n".join(
        f"@pytest.mark.exclusive\ndef test_x{i}():\n    span({str(log)!r}, 'x{i}', 0.4)\n" for i in range(2)
    )
    shared = "\n".join(f"def test_s{i}():\n    span({str(log)!r}, 's{i}', 0.3)\n" for i in range(6))
    pytester.makepyfile(
        test_a="import pytest\nfrom span import span\n" + exclusive,
        test_b="from span import span\n" + shared,
    )
    result = pytester.runpytest_subprocess("-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=8)
    spans = {name: (began, ended) for name, began, ended in map(json.loads, log.read_text().splitlines())}
    xs = [spans["x0"], spans["x1"]]
    for name, (began, ended) in spans.items():
        if name.startswith("s"):
            assert all(ended <= xb or began >= xe for xb, xe in xs), (name, spans)
            assert not spans["x0"][1] <= began <= spans["x1"][0], (name, spans)  # none in the gap
