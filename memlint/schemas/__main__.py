"""python -m memlint.schemas: write the schema files of this folder (see __init__.py)."""
import sys

from memlint.schemas import main

sys.exit(main())
