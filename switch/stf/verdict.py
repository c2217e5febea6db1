"""Compare the packets a target sent with an STF file's expectations (p4c's checkOutputs).

Every port named by a ``packet`` or ``expect`` line is an interface; packets sent to other
ports are lost, as they are on a BMv2 without that interface. For each interface, the
packets received must be as many as expected, in order, each matching its pattern (``*``
nibbles match anything; without ``$`` a longer packet matches). An ``expect PORT`` without
data accepts whatever arrives on that port.
"""

from __future__ import annotations

from switch.stf.parse import Command, Expect, Packet


def interfaces(commands: list[Command]) -> set[int]:
    return {c.port for c in commands if isinstance(c, (Packet, Expect))}


def matches(pattern: str, exact: bool, data: bytes) -> str | None:
    """None when ``data`` matches, else why not."""
    got = data.hex().upper()
    if exact and len(got) > len(pattern):
        return f"packet too long ({len(got) // 2} bytes, expected {len(pattern) // 2})"
    if len(got) < len(pattern):
        return f"packet too short ({len(got) // 2} bytes, expected {len(pattern) // 2})"
    for i, ch in enumerate(pattern):
        if ch != "*" and ch != got[i]:
            return f"differs at nibble {i}: expected {pattern}, got {got}"
    return None


def check(commands: list[Command], received: dict[int, list[bytes]]) -> str | None:
    """None when the outputs satisfy the expectations, else the first failure."""
    expected: dict[int, list[Expect]] = {}
    anything: set[int] = set()
    for c in commands:
        if isinstance(c, Expect):
            if c.pattern is None:
                anything.add(c.port)
            else:
                expected.setdefault(c.port, []).append(c)
    for port in sorted(interfaces(commands)):
        if port in anything:
            continue
        want = expected.get(port, [])
        got = received.get(port, [])
        if len(want) != len(got):
            return f"port {port}: expected {len(want)} packet(s), got {len(got)}"
        for i, (exp, data) in enumerate(zip(want, got)):
            assert exp.pattern is not None
            why = matches(exp.pattern, exp.exact, data)
            if why is not None:
                return f"port {port} packet {i} (line {exp.line}): {why}"
    return None
