"""The suite's guard on the checkout (tests/conftest.py `pytest_sessionfinish`): a run during which a
campaign's folder appeared in the checkout's `sark-results/` fails, naming it (a lab's `submit`
without `--out` wrote there before its processes ran in the lab's own folder: `kit.procs.Lab.start`).

A pytest run of its own (`pytester`, `-n 2`: the controller checks, its workers write) with the suite's
conftest's two hooks, the folder pointed at the run's own `sark-results/`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

CONFTEST = Path(__file__).resolve().parents[2] / "conftest.py"


def _run(pytester: pytest.Pytester, body: str) -> pytest.RunResult:
    pytest.importorskip("xdist")
    results = pytester.path / "sark-results"
    pytester.makeconftest(
        f"""
import importlib.util, pathlib
spec = importlib.util.spec_from_file_location("suiteconf", {str(CONFTEST)!r})
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)
suite.CHECKOUT_RESULTS = pathlib.Path({str(results)!r})
pytest_sessionstart = suite.pytest_sessionstart
pytest_sessionfinish = suite.pytest_sessionfinish
"""
    )
    (results / "campaign-before").mkdir(parents=True)  # there before the run: not the run's doing
    pytester.makepyfile(test_writes=f"import pathlib\ndef test_one():\n{body}\n")
    return pytester.runpytest_subprocess("-n", "2", "-p", "no:cacheprovider", "-p", "no:schemathesis")


def test_a_run_that_writes_a_campaign_folder_into_the_checkout_fails_naming_it(
    pytester: pytest.Pytester,
) -> None:
    written = pytester.path / "sark-results" / "campaign-1"
    done = _run(pytester, f"    pathlib.Path({str(written)!r}).mkdir()")
    assert done.ret == pytest.ExitCode.TESTS_FAILED
    said = f"error: tests wrote campaign folders into {written.parent}: ['campaign-1']"
    assert said in done.stdout.lines, done.stdout.str()
    done.assert_outcomes(passed=1)  # the test itself passed: the run is what failed


def test_a_run_that_writes_nothing_there_passes(pytester: pytest.Pytester) -> None:
    done = _run(pytester, "    pass")
    assert done.ret == pytest.ExitCode.OK
    assert "wrote campaign folders" not in done.stdout.str()
