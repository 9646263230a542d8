"""The processes the suite starts wait passively at their OpenMP threads' barriers (tests/conftest.py):
a child started as the labs start theirs, with libgomp asked to print its settings as it loads
(`OMP_DISPLAY_ENV=VERBOSE`), runs a parallel torch operation and says it spins 0 times before it
sleeps, where libgomp's own default is 300,000 (the spinning that doubled a generation's CPU-seconds
on the suite's busy cores).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

from kit.extras import needs

SPIN = re.compile(r"GOMP_SPINCOUNT = '(\d+)'")
PARALLEL = "import torch; torch.set_num_threads(2); (torch.ones(256, 256) @ torch.ones(256, 256)).sum()"


def _spin_count(env: dict[str, str]) -> int:
    done = subprocess.run(
        [sys.executable, "-c", PARALLEL], env=env | {"OMP_DISPLAY_ENV": "VERBOSE"},
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    found = SPIN.search(done.stderr)
    assert found is not None, done.stderr[-2000:]
    return int(found.group(1))


@needs("torch")
def test_the_suites_children_wait_passively_where_libgomp_would_spin() -> None:
    assert _spin_count(dict(os.environ)) == 0
    unset = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    assert _spin_count(unset) == 300_000  # the default the suite's setting changes
