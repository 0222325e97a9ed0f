"""`python -m wendyjax …`: see [`wendyjax.cli`][]."""

import sys

from .cli import main

if __name__ == "__main__":
    sys.exit(main())
