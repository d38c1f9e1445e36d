"""What the command line runs, beside memlint/cli.py:
- subcommands with modules of their own (plan, schema, server): each exposes
  add_arguments(parser) and run(args) -> int and is imported only when it runs (cli.COMMANDS
  names it); the other subcommands are rows of COMMANDS over the public API (memlint/api.py);
- arguments.py builds the parser, only the running subcommand's arguments;
- fix.py carries out `memlint check --fix` / `--diff` (the fixes themselves: memlint/fixes.py).

`color` is here, not in arguments.py: a one-file check prints without building a parser
(cli.quick_check), and arguments.py imports argparse (tests/test_startup.py).
"""
import os


def color(no_color: bool, stream) -> bool:
    """Whether a command colours what it writes to `stream`: never with --no-color or NO_COLOR
    (no-color.org), otherwise only on a terminal (rich's FORCE_COLOR is not asked)."""
    if no_color or os.environ.get("NO_COLOR"):
        return False
    return hasattr(stream, "isatty") and stream.isatty()
