"""`python -m memlint`: the same entry point as the `memlint` console script."""
import sys

from memlint.cli import main

sys.exit(main())
