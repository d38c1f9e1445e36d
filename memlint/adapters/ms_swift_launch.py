"""The swift / megatron command an ms-swift script runs (`Launch`), and the facts both ms-swift
readers share (adapters/ms_swift.py, adapters/ms_swift_megatron.py)."""
from __future__ import annotations

from memlint.adapters._values import to_bool, to_int
from memlint.ir import Provenance

SOURCE = "modelscope/ms-swift at 3602360"


class Launch:
    """The swift / megatron command the script runs: its tool, subcommand, arguments (by name,
    the last of a repeated one wins), the environment it runs in, and where it starts."""

    def __init__(self, tool: str, command: str, items: list, env: dict, anchor: Provenance):
        self.tool, self.command, self.items, self.env, self.anchor = (tool, command, items, env,
                                                                      anchor)
        self.args = {item.name: item for item in items}
        self.launched = False   # torchrun / accelerate launch gave the processes
        self.config = None      # (path, prov) of a YAML / JSON arguments file
        self.command_line = True  # False: an arguments file alone (no command, no environment)

    def value(self, name: str):
        item = self.args.get(name)
        return None if item is None or item.unresolved else item.value

    def env_int(self, name: str) -> tuple:
        """(value, prov) of a whole-number environment variable, else (None, None)."""
        found = self.env.get(name)
        if found is None or found[2]:
            return None, None
        return to_int(found[0]), found[1]


def truthy(launch: Launch, name: str, default: bool = False) -> bool:
    item = launch.args.get(name)
    if item is None:
        return default
    value = to_bool(item.value)
    return default if value is None else value
