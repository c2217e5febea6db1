"""Errors raised while loading a BMv2 JSON program.

Every feature the engine does not execute is refused when the program is loaded (a config
push), never silently mis-executed: ``Unsupported`` names the feature and where it appears.
"""

from __future__ import annotations


class ConfigError(Exception):
    """The JSON is not a valid BMv2 program for this engine (malformed or inconsistent)."""


class Unsupported(ConfigError):
    """The JSON uses a feature the engine does not implement; the message names it."""

    def __init__(self, feature: str, where: str = "") -> None:
        self.feature = feature
        self.where = where
        super().__init__(f"unsupported: {feature}" + (f" (in {where})" if where else ""))
