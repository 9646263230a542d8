"""The generate child keeps every third-party progress bar and message off the terminal it inherited.

transformers' GGUF loader draws its own tqdm bar ("Converting and de-quantizing GGUF tensors"), which
`transformers.utils.logging.disable_progress_bar()` does not reach; on the embedded swarm the child's
stderr is `submit`'s terminal. A real interpreter runs the child's first step and then a tqdm bar, a
print and a write straight to file descriptor 2; the parent reads nothing back.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Final

ROOT: Final = Path(__file__).parents[4]

CHILD: Final = """
import os, sys
from drivers.measuring.genchild import silence_output
silence_output()
from tqdm.auto import tqdm
for _ in tqdm(range(50), desc="Converting and de-quantizing GGUF tensors..."):
    pass
print("to stdout")
print("to stderr", file=sys.stderr)
os.write(2, b"straight to fd 2")
assert os.environ["TQDM_DISABLE"] == "1"
"""


def test_the_generate_child_prints_nothing_where_it_was_started() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CHILD],
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0  # its own assertion held (nothing would say so if it failed)
    assert done.stdout == ""
    assert done.stderr == ""
