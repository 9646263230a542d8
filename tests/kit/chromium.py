"""Headless Chromium's environment for the views labs: a short temporary folder of its own.

Chromium makes its singleton socket's folder (`org.chromium.Chromium.XXXXXX`) in TMPDIR and, killed
as the labs end it, leaves it there: /tmp held 162 such folders after a few suites. The test's own
`tmp_path` will not do: a unix socket's path is at most 107 bytes, and under xdist that folder's path
alone is about 70, so Chromium aborts (SIGABRT) as it binds the socket. So each start gets a short
folder under /tmp, removed when it ends.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def chromium_env(**extra: str) -> Iterator[dict[str, str]]:
    """This process's environment with `extra` and TMPDIR a fresh short folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="chromium-", dir="/tmp") as folder:
        yield {**os.environ, **extra, "TMPDIR": folder}
