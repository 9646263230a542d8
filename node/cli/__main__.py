"""`python -m node.cli`: the `sark-node` command line, where no `sark-node` script is installed."""

from node.cli import main

main()
