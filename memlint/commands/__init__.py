"""Subcommands with their own modules: each exposes add_arguments(parser) and run(args)
(memlint/cli.py names them in COMMANDS; memlint/commands/arguments.py builds the parser)."""
