"""`memlint schema NAME`: print one of the JSON Schemas memlint publishes (memlint/schemas/).

    memlint schema deepspeed          ds_config*.json (DeepSpeed's keys, types, defaults)
    memlint schema memlint            memlint.toml / *.memlint.toml
    memlint schema tool-memlint       [tool.memlint] of pyproject.toml
    memlint schema catalog            the SchemaStore catalog entries (fileMatch patterns)
    memlint schema --list             the names

Exit codes: 0 printed, 2 no schema has that name. Wired into memlint/cli.py's COMMANDS as
add_arguments(parser) + run(args).
"""
from __future__ import annotations

import sys

from memlint.errors import UsageError


def add_arguments(parser) -> None:
    parser.add_argument("name", nargs="?", metavar="NAME",
                        help="deepspeed, memlint, tool-memlint or catalog")
    parser.add_argument("--list", action="store_true", help="list the schemas")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def run(args) -> int:
    # start-up: the schema builders load only when a schema is printed
    from memlint import schemas

    if args.list or args.name is None:
        if args.name is None and not args.list:
            raise UsageError("name a schema: " + ", ".join(schemas.NAMES))
        sys.stdout.write("\n".join(schemas.NAMES) + "\n")
        return 0
    if args.name not in schemas.NAMES:
        # start-up: only a wrong name needs the suggestion helper
        from memlint.keys import suggest

        hint = suggest(args.name, list(schemas.NAMES))
        raise UsageError(f"no schema is called {args.name!r}"
                         + (f"; did you mean {hint!r}?" if hint else "")
                         + " (" + ", ".join(schemas.NAMES) + ")")
    sys.stdout.write(schemas.render(args.name))
    return 0
