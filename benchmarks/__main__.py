"""`python -m benchmarks [NAME ...] [--list] [-- ARGS]` from the repository root: the same runner as
`python -m wendyjax bench` (wendyjax/cli), which lists the scripts and runs any of them."""

import sys

from wendyjax.cli import main

sys.exit(main(["bench", *sys.argv[1:]]))
