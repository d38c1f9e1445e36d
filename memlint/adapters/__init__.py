"""Adapters: one module per config format, each turning a file into a `memlint.ir.Partial`.

Each adapter module exposes `FORMAT` (a short name), `detect(path, text) -> bool` (cheap: name,
extension, one or two sentinel keys) and `load(path, text) -> Partial` (never raises on bad input:
problems become diagnostics in the Partial).
"""
