"""An intake child that ends badly, run in place of `node.intake` (``python -m tests.kit.badintake``).

It says it started, as `node.intake` does; then, for a campaign file named ``stall.yaml``, it waits
past any deadline; for any other, it ends the way a child the kernel stops at its CPU cap ends
(SIGKILL).
"""

from __future__ import annotations

import os
import signal
import sys
import time

if __name__ == "__main__":
    sys.stdout.buffer.write(b"started\n")
    sys.stdout.flush()
    if sys.argv[-1].endswith("stall.yaml"):
        time.sleep(60)
    os.kill(os.getpid(), signal.SIGKILL)
