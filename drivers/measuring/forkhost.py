"""What the fork server imports before it forks a child (`spawning.start_method`: Linux, not frozen).

Ctrl-C first: multiprocessing's fork server saves the SIGINT handler it finds once its imports are
done and gives it back to every child it forks, so with it ignored here a child ignores Ctrl-C from
its first instruction, as a spawned one does (`spawning`: the parent decides what stops). The server
ignores it too, and ends when its node does (multiprocessing closes its pipe).

Then the modules of this room's children (measuring, generation, peaks, cost, the challenges' kernels),
so that such a child starts with them imported instead of spending 0.2-0.4 CPU-s on `protocol`, numpy
and its entry. The runtimes (onnxruntime, torch, llama.cpp, ...) are not among them: each child
imports its runtime itself as before. The later rooms' children (the probe, the token counter) import
their own entries, as a spawned child does.
"""

from __future__ import annotations

import signal

signal.signal(signal.SIGINT, signal.SIG_IGN)

import drivers.measuring.chainchild  # noqa: E402
import drivers.measuring.challengechild  # noqa: E402
import drivers.measuring.child  # noqa: E402
import drivers.measuring.costchild  # noqa: E402
import drivers.measuring.genchild  # noqa: E402
import drivers.measuring.peakchild  # noqa: E402, F401 (imported for the fork server, not used here)
