"""Helpers the generated code calls where a BMv2 operation is not one Python operator.

BMv2 asserts (aborts the switch) on a negative shift amount, division or modulo by zero or
of a negative number; here those give 0 instead, so a packet can never stop the target.
Shifting left by 2**16 bits or more also gives 0: p4c masks every shift result to the
destination's width, so an unbounded shift amount taken from a packet would only cost memory.
"""

from __future__ import annotations

from switch.p4json.runtime import RegisterArray

MAX_SHIFT = 1 << 16


def shl(value: int, amount: int) -> int:
    if amount < 0 or amount >= MAX_SHIFT:
        return 0
    return value << amount


def shr(value: int, amount: int) -> int:
    if amount < 0:
        return 0
    return value >> amount


def mod(a: int, b: int) -> int:
    if b <= 0 or a < 0:
        return 0
    return a % b


def div(a: int, b: int) -> int:
    if b <= 0 or a < 0:
        return 0
    return a // b


def reg_read(reg: RegisterArray, index: int) -> int:
    """A register cell in an expression (BMv2 ``register`` operand); out of range reads 0."""
    return reg.cells[index] if 0 <= index < reg.size else 0


HELPERS = {"_shl": shl, "_shr": shr, "_mod": mod, "_div": div, "_reg_read": reg_read}
