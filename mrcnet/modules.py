"""Optional subcommand modules: import lazily, tell "not built" apart from a real import error."""

from __future__ import annotations

import importlib
from types import ModuleType


def load_optional(module_name: str) -> ModuleType | None:
    """Import `module_name`; None if that module (or a parent package) does not exist.
    An ImportError raised *inside* an existing module propagates: it is a bug, not absence."""
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            return None
        raise
