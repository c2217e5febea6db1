"""The shipped Lua dissector is exactly what luagen generates from the layout tables."""

from __future__ import annotations

from hosts.wire import layout as L
from hosts.wire.luagen import LUA_PATH, generate


def test_shipped_lua_is_generated_from_layout() -> None:
    assert LUA_PATH.read_text() == generate(), "run: python -m hosts.wire.luagen"


def test_every_field_has_a_named_lua_field() -> None:
    text = generate()
    for attr, layout in {"bth": L.BTH, **L.MRC_HEADERS}.items():
        for f in layout.fields:
            assert f'"mrc.{attr}.{f.name}"' in text
