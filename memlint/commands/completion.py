"""`memlint completion bash|zsh|fish`: a shell completion script, made from memlint's own argument
parser (every subcommand, option and choice, so it never falls behind the command line).

    memlint completion bash > ~/.local/share/bash-completion/completions/memlint
    memlint completion zsh  > "${fpath[1]}/_memlint"      (bash's function, via bashcompinit)
    memlint completion fish > ~/.config/fish/completions/memlint.fish

Words after an option that takes a value complete as that option's choices (--format, --fail-on,
...), or as file names; other words complete as options (after `-`) or file names. Wired into
memlint/cli.py's COMMANDS as add_arguments(parser) + run(args).
"""
from __future__ import annotations

import argparse
import sys

SHELLS = ("bash", "zsh", "fish")


def add_arguments(parser) -> None:
    parser.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def commands(parser: argparse.ArgumentParser) -> dict:
    """{subcommand: (help, [(option strings, takes a value, choices, help)], [the choices of
    its positional arguments])}."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    helps = {choice.dest: choice.help for choice in sub._choices_actions}
    out = {}
    for name, child in sub.choices.items():
        options, words = [], []
        for action in child._actions:
            if not action.option_strings:
                words += [str(c) for c in action.choices or ()]
                continue
            takes = action.nargs != 0
            choices = [str(c) for c in action.choices] if action.choices else []
            options.append((action.option_strings, takes, choices, action.help or ""))
        out[name] = (helps.get(name, ""), options, words)
    return out


def bash(table: dict) -> str:
    lines = ["# memlint completion for bash (memlint completion bash)", "_memlint() {",
             '    local cur="${COMP_WORDS[COMP_CWORD]}" prev="${COMP_WORDS[COMP_CWORD-1]}"',
             '    local cmd="" i',
             '    for ((i = 1; i < COMP_CWORD; i++)); do',
             '        case "${COMP_WORDS[i]}" in -*) ;; *) cmd="${COMP_WORDS[i]}"; break ;; esac',
             "    done",
             '    if [ -z "$cmd" ]; then',
             f'        COMPREPLY=($(compgen -W "{" ".join(table)} --version --help" -- "$cur"))',
             "        return", "    fi", '    local opts="" values="" words=""',
             '    case "$cmd" in']
    for name, (_help, options, words) in table.items():
        flags = " ".join(flag for strings, *_ in options for flag in strings)
        lines.append(f'        {name}) opts="{flags}" words="{" ".join(words)}"')
        cases = [(strings, choices) for strings, takes, choices, _ in options if takes]
        if cases:
            lines.append('            case "$prev" in')
            for strings, choices in cases:
                words = " ".join(choices) if choices else "__files__"
                lines.append(f'                {"|".join(strings)}) values="{words}" ;;')
            lines.append("            esac")
        lines.append("            ;;")
    lines += ["    esac",
              '    if [ "$values" = "__files__" ]; then',
              '        COMPREPLY=($(compgen -f -- "$cur"))',
              '    elif [ -n "$values" ]; then',
              '        COMPREPLY=($(compgen -W "$values" -- "$cur"))',
              '    elif [[ "$cur" == -* ]]; then',
              '        COMPREPLY=($(compgen -W "$opts" -- "$cur"))',
              '    elif [ -n "$words" ]; then',
              '        COMPREPLY=($(compgen -W "$words" -- "$cur"))',
              "    else",
              '        COMPREPLY=($(compgen -f -- "$cur"))',
              "    fi", "}", "complete -o default -o bashdefault -F _memlint memlint", ""]
    return "\n".join(lines)


def zsh(table: dict) -> str:
    return ("#compdef memlint\n# memlint completion for zsh (memlint completion zsh): bash's "
            "completion function through zsh's bashcompinit\n"
            "autoload -U +X bashcompinit && bashcompinit\n" + bash(table))


def _fish_text(text: str) -> str:
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def fish(table: dict) -> str:
    names = " ".join(table)
    lines = ["# memlint completion for fish (memlint completion fish)",
             "complete -c memlint -f -n __fish_use_subcommand -l version -d 'print the version'"]
    for name, (help_, options, words) in table.items():
        lines.append(f"complete -c memlint -f -n '__fish_use_subcommand' -a {name} "
                     f"-d {_fish_text(help_)}")
        when = f"-n '__fish_seen_subcommand_from {name}'"
        if words:
            lines.append(f"complete -c memlint -f {when} -a {_fish_text(' '.join(words))}")
        for strings, takes, choices, text in options:
            parts = []
            for flag in strings:
                parts.append(f"-l {flag[2:]}" if flag.startswith("--") else f"-s {flag[1:]}")
            value = ""
            if choices:
                value = f" -x -a {_fish_text(' '.join(choices))}"
            elif takes:
                value = " -r -F"
            lines.append(f"complete -c memlint {when} {' '.join(parts)}{value} "
                         f"-d {_fish_text(text.split('. ')[0][:80])}")
    lines.append(f"# subcommands: {names}")
    return "\n".join(lines) + "\n"


def run(args) -> int:
    # start-up: the full parser (every subcommand) only for a completion script
    from memlint.cli import build_parser

    table = commands(build_parser())
    sys.stdout.write({"bash": bash, "zsh": zsh, "fish": fish}[args.shell](table))
    return 0
