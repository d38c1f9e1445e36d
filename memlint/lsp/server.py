"""`memlint server`: memlint as a Language Server (LSP over stdio; pygls + lsprotocol, the
optional extra `memlint-llm[lsp]`).

- Diagnostics on open, change (debounced: DEBOUNCE seconds after the last keystroke) and save,
  computed from the editor's buffers (every open document, so an unsaved memlint.toml counts
  too) with the run context `memlint check` finds (memlint/lsp/analysis.py).
- Hover on a memory-relevant setting: the stage peak now and at the neighbour values.
- Code actions: the ML003 did-you-mean rename, and suppressing a finding.

The workspace folder is the working directory (as when `memlint check` runs from the repository
root). `initializationOptions` may give `{"set": ["world_size=64", ...], "model": "...",
"debounce": 0.3}`. Checks run one at a time on a worker thread, so the editor's messages are
read while memlint works; a document's analysis is kept per version and reused by hovers and
code actions.
"""
from __future__ import annotations

import asyncio
import os
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import unquote, urlparse

from lsprotocol import types
from pygls.lsp.server import LanguageServer

from memlint import __version__
from memlint.api import Options
from memlint.document import analyze
from memlint.lsp import analysis as A

DEBOUNCE = 0.3   # seconds of quiet after a change before the document is checked
SOURCE = "memlint"


def as_uri(path: str) -> str:
    # start-up: pathlib only in the server
    from pathlib import Path

    return Path(path).as_uri()


def path_of(uri: str):
    parsed = urlparse(uri)
    if parsed.scheme != "file":
        return None
    return os.path.abspath(unquote(parsed.path))


class MemlintServer(LanguageServer):
    def __init__(self):
        super().__init__("memlint", __version__,
                         text_document_sync_kind=types.TextDocumentSyncKind.Incremental)
        self.options = Options()
        self.debounce = DEBOUNCE
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="memlint-check")
        self.analyses: dict = {}   # uri -> (version, Analysis)
        self.pending: dict = {}    # uri -> asyncio task waiting out the debounce
        self.related: dict = {}    # uri -> uris of its runs' other files it published for

    # -- what the worker does ---------------------------------------------------------------

    def buffers(self) -> dict:
        out = {}
        for uri, document in self.workspace.text_documents.items():
            path = path_of(uri)
            if path is not None:
                out[path] = document.source
        return out

    def analyze(self, uri: str, version):
        path = path_of(uri)
        if path is None:
            return None
        found = analyze(path, self.buffers(), self.options)
        self.analyses[uri] = (version, found)
        return found

    async def check(self, uri: str) -> None:
        document = self.workspace.get_text_document(uri)
        version = document.version
        loop = asyncio.get_running_loop()
        found = await loop.run_in_executor(self.worker, self.analyze, uri, version)
        if found is None or self.workspace.get_text_document(uri).version != version:
            return   # a newer change is on its way
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
            uri=uri, version=version, diagnostics=[_diagnostic(d) for d in found.diagnostics]
            + ([_failure(found.error)] if found.error else [])))
        self.publish_elsewhere(uri, found)

    def publish_elsewhere(self, uri: str, found) -> None:
        """A run's verdict may point into another of its files (the memlint.toml's gpu line):
        those files get the run's findings too (and an empty list once they are gone), unless
        the editor has them open, where their own check speaks for them."""
        others = {as_uri(path): found_here for path, found_here in found.elsewhere.items()}
        for other in self.related.get(uri, set()) - set(others):
            if other not in self.workspace.text_documents:
                self.text_document_publish_diagnostics(
                    types.PublishDiagnosticsParams(uri=other, diagnostics=[]))
        for other, found_here in others.items():
            if other not in self.workspace.text_documents:
                self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(
                    uri=other, diagnostics=[_diagnostic(d) for d in found_here]))
        self.related[uri] = set(others)

    def schedule(self, uri: str, delay: float) -> None:
        waiting = self.pending.pop(uri, None)
        if waiting is not None:
            waiting.cancel()

        async def later():
            await asyncio.sleep(delay)
            self.pending.pop(uri, None)
            await self.check(uri)
        self.pending[uri] = asyncio.ensure_future(later())

    async def current(self, uri: str):
        """The analysis of the document's current version (made now if it is stale)."""
        document = self.workspace.get_text_document(uri)
        kept = self.analyses.get(uri)
        if kept is not None and kept[0] == document.version:
            return kept[1]
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.worker, self.analyze, uri, document.version)

    async def hover_text(self, uri: str, line: int, column: int):
        found = await self.current(uri)
        if found is None:
            return None
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.worker, A.hover, found, line, column)


def _range(line, column, end_column=None) -> types.Range:
    line0 = max((line or 1) - 1, 0)
    start = max((column or 1) - 1, 0)
    end = start + 1 if end_column is None else max(end_column - 1, start)
    return types.Range(types.Position(line0, start), types.Position(line0, end))


def _diagnostic(d) -> types.Diagnostic:
    return types.Diagnostic(range=_range(d.line, d.column, 10_000), message=d.message,
                            severity=types.DiagnosticSeverity(A.severity_of(d)),
                            code=d.code, source=SOURCE, data={"rule": d.rule})


def _failure(message: str) -> types.Diagnostic:
    return types.Diagnostic(range=_range(1, 1), message=f"memlint could not check this file: "
                            f"{message}", severity=types.DiagnosticSeverity.Error, source=SOURCE)


def _edit(edit: A.Edit) -> types.TextEdit:
    return types.TextEdit(range=types.Range(
        types.Position(edit.start[0] - 1, edit.start[1] - 1),
        types.Position(edit.end[0] - 1, edit.end[1] - 1)), new_text=edit.text)


def build() -> MemlintServer:
    server = MemlintServer()

    @server.feature(types.INITIALIZE)
    def initialize(ls: MemlintServer, params: types.InitializeParams):
        root = params.root_uri and path_of(params.root_uri)
        folders = params.workspace_folders or []
        if not root and folders:
            root = path_of(folders[0].uri)
        if root and os.path.isdir(root):
            os.chdir(root)
        given = params.initialization_options or {}
        if isinstance(given, dict):
            ls.options = Options(model=given.get("model"),
                                 assignments=tuple(str(a) for a in given.get("set", ())))
            ls.debounce = float(given.get("debounce", DEBOUNCE))

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    async def did_open(ls: MemlintServer, params: types.DidOpenTextDocumentParams):
        await ls.check(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def did_change(ls: MemlintServer, params: types.DidChangeTextDocumentParams):
        ls.schedule(params.text_document.uri, ls.debounce)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE)
    async def did_save(ls: MemlintServer, params: types.DidSaveTextDocumentParams):
        ls.schedule(params.text_document.uri, 0)

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def did_close(ls: MemlintServer, params: types.DidCloseTextDocumentParams):
        uri = params.text_document.uri
        ls.analyses.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri,
                                                                            diagnostics=[]))

    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def hover(ls: MemlintServer, params: types.HoverParams):
        position = params.position
        text = await ls.hover_text(params.text_document.uri, position.line + 1,
                                   position.character + 1)
        if not text:
            return None
        return types.Hover(contents=types.MarkupContent(kind=types.MarkupKind.Markdown,
                                                        value=text))

    @server.feature(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionOptions(
        code_action_kinds=[types.CodeActionKind.QuickFix]))
    async def code_action(ls: MemlintServer, params: types.CodeActionParams):
        uri = params.text_document.uri
        found = await ls.current(uri)
        if found is None:
            return []
        text = ls.workspace.get_text_document(uri).source
        first, last = params.range.start.line + 1, params.range.end.line + 1
        out = []
        for action in A.actions(found, text, first, last):
            out.append(types.CodeAction(
                title=action.title, kind=types.CodeActionKind.QuickFix,
                diagnostics=[_diagnostic(action.diagnostic)], is_preferred=action.preferred,
                edit=types.WorkspaceEdit(changes={uri: [_edit(e) for e in action.edits]})))
        return out

    return server


def serve() -> int:
    build().start_io()
    return 0
