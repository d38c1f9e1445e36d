"""Subcommands with their own modules: each exposes add_parser(subparsers) and run(args)."""
