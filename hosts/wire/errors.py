"""The one exception the wire codec raises for bad bytes or unencodable values."""

from __future__ import annotations


class WireError(ValueError):
    """Malformed, truncated or unsupported packet data.

    ``reason`` is a short human-readable cause, ``offset`` the byte offset (from the start of the
    buffer handed to the decoder) at which the problem was found. Decoding arbitrary bytes
    either returns a packet or raises this; nothing else.
    """

    __slots__ = ("offset", "reason")

    def __init__(self, reason: str, offset: int = 0) -> None:
        super().__init__(f"{reason} (at byte {offset})")
        self.reason = reason
        self.offset = offset

    def __reduce__(self) -> tuple[type[WireError], tuple[str, int]]:
        return (WireError, (self.reason, self.offset))
