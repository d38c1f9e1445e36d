"""memlint in the editor: a Language Server (`memlint server`).

analysis.py  what the server knows about a document, protocol-free: the check of its run from
             the editor's buffers, hovers with memory figures, code actions
server.py    the LSP wiring (pygls + lsprotocol, the optional extra memlint-llm[lsp]): open,
             change (debounced), save, hover, code actions
"""
