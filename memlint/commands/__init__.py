"""What the command line runs, beside memlint/cli.py:
- subcommands with modules of their own (plan, schema, server): each exposes
  add_arguments(parser) and run(args) -> int and is imported only when it runs (cli.COMMANDS
  names it); the other subcommands are rows of COMMANDS over the public API (memlint/api.py);
- arguments.py builds the parser, only the running subcommand's arguments;
- fix.py carries out `memlint check --fix` / `--diff` (the fixes themselves: memlint/fixes.py).
"""
