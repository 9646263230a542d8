"""The suite's `exclusive` lock (tests/conftest.py `pytest_runtest_protocol`): under xdist an exclusive
test never runs beside another test, and two exclusive tests in a row on one worker keep the lock
between them, so no test of the other worker starts in the gap (before, it did, and the second waited
for it: 94 s idle in the CI run at a252ecf). The wait for the lock is not a test's own time: the lock
is taken outside pytest-timeout's timer (a shared lab's set-up once waited past its 300 s beside
`kit.load 2` while the real-model verification waited for the cores and ran).

A pytest run of its own (`pytester`, `-n 2 --dist loadfile`, every test's timeout 1 s) with the
suite's conftest's hook: one file of two exclusive tests of 0.6 s, one of six shared ones of 0.3 s;
each test writes when it began and ended. What is asserted is order, never speed: no shared test's
span meets an exclusive one's, none lies between the two exclusive tests, and every test passed,
though a shared test that waited for both exclusive ones waited 1.2 s.
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
        f"@pytest.mark.exclusive\ndef test_x{i}():\n    span({str(log)!r}, 'x{i}', 0.6)\n" for i in range(2)
    )
    shared = "\n".join(f"def test_s{i}():\n    span({str(log)!r}, 's{i}', 0.3)\n" for i in range(6))
    pytester.makepyfile(
        test_a="import pytest\nfrom span import span\n" + exclusive,
        test_b="from span import span\n" + shared,
    )
    args = ("-n", "2", "--dist", "loadfile", "-p", "no:cacheprovider", "-o", "timeout=1")
    result = pytester.runpytest_subprocess(*args)
    result.assert_outcomes(passed=8)
    spans = {name: (began, ended) for name, began, ended in map(json.loads, log.read_text().splitlines())}
    xs = [spans["x0"], spans["x1"]]
    for name, (began, ended) in spans.items():
        if name.startswith("s"):
            assert all(ended <= xb or began >= xe for xb, xe in xs), (name, spans)
            assert not spans["x0"][1] <= began <= spans["x1"][0], (name, spans)  # none in the gap


def test_the_lock_is_taken_outside_pytest_timeouts_timer(pytestconfig: pytest.Config) -> None:
    """pluggy calls a hook's wrappers from the last of its list to the first, each around the next:
    the suite's must come after pytest-timeout's, so that the timer starts once the lock is held."""
    impls = pytestconfig.pluginmanager.hook.pytest_runtest_protocol.get_hookimpls()
    names = [impl.plugin_name for impl in impls]
    suite = next(i for i, impl in enumerate(impls) if impl.plugin.__file__ == str(CONFTEST))
    timer = names.index("timeout")
    assert suite > timer, names
