"""`memlint server`: the Language Server over stdio (memlint/lsp/server.py).

Needs the optional extra: `pip install 'memlint-llm[lsp]'` (pygls, lsprotocol); without it the
command says so and exits 2. Editors start it as `memlint server` (editors/ has the VS Code
extension and the Neovim and Helix set-ups). Wired into memlint/cli.py's COMMANDS as
add_arguments(parser) + run(args).
"""
from __future__ import annotations

from memlint.errors import UsageError


def add_arguments(parser) -> None:
    parser.add_argument("--stdio", action="store_true",
                        help="talk LSP over standard input and output (the default; editors "
                        "that pass --stdio are accepted)")
    parser.add_argument("--debug", action="store_true", help="tracebacks for internal errors")


def run(args) -> int:
    try:
        # start-up: pygls and lsprotocol load only for the language server
        from memlint.lsp.server import serve
    except ImportError as exc:
        raise UsageError(f"memlint server needs the lsp extra ({exc.name} is not installed): "
                         "pip install 'memlint-llm[lsp]'") from None
    return serve()
