"""The command line's parser, built for the one command that runs.

`build(commands, version, argv)` makes the top-level parser with every subcommand's name and help
line (what `memlint --help` lists), but adds arguments only to the subcommand `argv` names: a
`memlint check` does not build the parsers of plan, fit or compare (bench/speed.py measures the
start-up this saves). Without `argv` every subcommand is complete (tests, documentation).

A subcommand is a `memlint.cli.Command`; one whose arguments live in a module of its own names
that module, imported only when that subcommand runs, so a new subcommand costs the others
nothing.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys


def terminal_width() -> int:
    """The terminal's columns as shutil.get_terminal_size() gives them (COLUMNS, then the
    terminal of stdout, then 80), without importing shutil (and its bz2/lzma) at start-up."""
    try:
        columns = int(os.environ.get("COLUMNS", ""))
    except ValueError:
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return columns or 80


class Formatter(argparse.HelpFormatter):
    """For start-up speed: argparse builds a formatter for every add_argument call (to check the
    metavar), each asking shutil for the terminal size; the width is looked up once."""

    width = None

    def __init__(self, prog, indent_increment=2, max_help_position=24, width=None):
        if width is None:
            if Formatter.width is None:
                Formatter.width = terminal_width() - 2
            width = Formatter.width
        super().__init__(prog, indent_increment, max_help_position, width)


class Parser(argparse.ArgumentParser):
    """ArgumentParser with the formatter above (the subcommands' parsers are of this class)."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", Formatter)
        super().__init__(*args, **kwargs)


def command_named(argv, names) -> str | None:
    """The subcommand `argv` runs: its first word that is no option (the top-level options,
    -h and --version, take no value), if it names one."""
    for word in argv:
        if not word.startswith("-"):
            return word if word in names else None
    return None


def add_arguments(command, parser) -> None:
    """The subcommand's own arguments, from its function or its module's add_arguments."""
    if isinstance(command.arguments, str):
        importlib.import_module(command.arguments).add_arguments(parser)
    else:
        command.arguments(parser)


def build(commands: dict, version: str, argv=None) -> Parser:
    parser = Parser(
        prog="memlint",
        description="Lint LLM training configs for out-of-memory and launch-time errors.")
    parser.add_argument("--version", action="version", version=version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    wanted = None if argv is None else command_named(argv, commands)
    for name, command in commands.items():
        options = {"help": command.help}
        if command.description:
            options["description"] = command.description
        child = sub.add_parser(name, **options)
        if argv is None or name == wanted:
            add_arguments(command, child)
    return parser
