"""memlint/rules/_index.py, the built-in rules listed without importing their modules, made from
the modules themselves (`registry()` reads the index; a check imports a rule's module only when
the run's plan reaches one of its rules). Regenerate it after adding a rule or changing a rule's
code, name, preview flag, formats or requires:

    python -m memlint.rules.index

tests/test_rule_index.py fails while the index in the repository is not current.
"""
from __future__ import annotations

import os
import sys

from memlint import safe_write
from memlint.rules import BUILTIN_MODULES, Registry

PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_index.py")
HEADER = '''"""The built-in rules, listed without importing their modules (memlint/rules/__init__.py).

Generated from the rule modules by `python -m memlint.rules.index`: do not edit;
tests/test_rule_index.py fails while it is stale.
"""

# (code, name, module, preview, reserved, formats, requires), in registration order
ENTRIES = (
'''


def loaded() -> Registry:
    """Every built-in rule module imported, as the registry did before it had an index."""
    reg = Registry()
    for module_name in BUILTIN_MODULES:
        reg.load_module(module_name, builtin=True)
    if reg.diagnostics:
        raise RuntimeError("; ".join(d.message for d in reg.diagnostics))
    return reg


def render() -> str:
    lines = []
    for rule in loaded().rules.values():
        fields = (rule.code, rule.name, type(rule).__module__, bool(rule.preview),
                  bool(getattr(rule, "reserved", False)), tuple(rule.formats or ()),
                  tuple(rule.requires))
        lines.append(f"    {fields!r},")
    return HEADER + "\n".join(lines) + "\n)\n"


def main(argv=None) -> int:
    text = render()
    current = None
    if os.path.exists(PATH):
        with open(PATH, encoding="utf-8") as handle:
            current = handle.read()
    if current != text:
        safe_write.write(PATH, text, safe_write.write_root(os.path.dirname(PATH)))
        print(f"wrote {PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
