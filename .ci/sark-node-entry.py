"""The binary's entry point (PyInstaller runs this file as __main__; a pip install uses node.cli:main).

A frozen app has no Python to start children with: `sys.executable` is the binary itself. So:
- `multiprocessing.freeze_support()` turns a `spawn` child's command line (the measurement children
  of drivers.measuring.harness) back into that child, and PyInstaller's hook does the same for the resource
  tracker that `spawn` starts;
- ``sark-node -m MODULE`` runs MODULE as ``python -m MODULE`` would: the node starts some children
  as ``(sys.executable, "-m", module)`` (node.intake, for `serve`), which then works frozen and not.
"""

import multiprocessing
import runpy
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()
    if len(sys.argv) >= 3 and sys.argv[1] == "-m":
        module = sys.argv[2]
        sys.argv = [sys.argv[0], *sys.argv[3:]]
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except ImportError as exc:  # a module the binary does not carry: bad input, not a crash
            print(f"error: {exc}", file=sys.stderr)
            sys.exit(2)
        sys.exit(0)
    from node.cli import main

    main()
