"""The options of `mrcnet sim` as a grid: every option's value is a comma list, and every
combination of the lists is one run (`mrcnet sim sweep`); a single run is the grid of one
point. One table (``OPTIONS``) says how each option's text becomes a ``SimOptions`` field, so
a single run and a sweep accept the same values and refuse the same ones with the same words.

``--fail`` and ``--restore`` list alternatives too: ``none`` or one or more ``A-B@S`` specs
joined by ``+`` (one run's failures). A single run may repeat the flag (as `mrcnet up`); a
sweep takes each once.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from common.units import parse_duration, parse_rate, parse_size
from controller.profile_store import LB_POLICIES
from mrcnet.fabric.runparams import CC_CHOICES
from mrcnet.sim.run import SimOptions
from topologies.model import PathMode


class GridError(ValueError):
    """A grid (or a single run's options) that cannot be run; the message names the option."""


def _choice(choices: tuple[str, ...], upper: bool = False) -> Callable[[str], str]:
    def parse(text: str) -> str:
        value = text.upper() if upper else text
        if value not in choices:
            raise ValueError(f"one of {', '.join(choices)}")
        return value
    return parse


def _nonneg_seconds(text: str) -> float:
    value = parse_duration(text)
    if not value >= 0:
        raise ValueError("must be >= 0 seconds")
    return value


def _pos_seconds(text: str) -> float:
    value = parse_duration(text)
    if not value > 0:
        raise ValueError("must be > 0 seconds")
    return value


def _pos_size(text: str) -> int:
    value = parse_size(text)
    if value <= 0:
        raise ValueError("must be positive")
    return value


def _checked(check: Callable[[str], object]) -> Callable[[str], str]:
    """A value kept as written (the topology is derived from the text) once ``check`` took it."""
    def parse(text: str) -> str:
        check(text)
        return text
    return parse


def _schedule(text: str) -> tuple[str, ...]:
    """One alternative of --fail/--restore: ``none`` or specs joined by ``+``."""
    if text == "none":
        return ()
    specs = tuple(text.split("+"))
    if any(not s for s in specs):
        raise ValueError("an empty failure spec (A-B@S, joined by +)")
    return specs


@dataclass(frozen=True)
class GridOption:
    """One option of `mrcnet sim`: its flag, its ``SimOptions`` field, how its text is read,
    and its value on a plot's x axis (None: not a number worth plotting against)."""

    flag: str
    field: str
    parse: Callable[[str], Any]
    numeric: Callable[[Any], float] | None = None
    unit: str = ""  # of the numeric value

    @property
    def dest(self) -> str:
        """The argparse attribute of the flag."""
        return self.flag.lstrip("-").replace("-", "_")


OPTIONS: tuple[GridOption, ...] = (
    GridOption("--run", "run", str),
    GridOption("--qp", "qp", _choice(("MRC", "RC"), upper=True)),
    GridOption("--mode", "mode", _choice(tuple(m.value for m in PathMode))),
    GridOption("--size", "size", _pos_size, float, "bytes"),
    GridOption("--cc", "cc", _choice(tuple(CC_CHOICES))),
    GridOption("--lb", "lb", _choice(tuple(LB_POLICIES))),
    GridOption("--window", "window", _pos_size, float, "bytes"),
    GridOption("--rate", "rate", _checked(parse_rate), parse_rate, "bit/s"),
    GridOption("--delay", "delay", _checked(parse_duration), parse_duration, "s"),
    GridOption("--cp-delay", "cp_delay", _nonneg_seconds, float, "s"),
    GridOption("--fail", "fail", _schedule),
    GridOption("--restore", "restore", _schedule),
    GridOption("--seed", "seed", int),
    GridOption("--limit", "limit_s", _pos_seconds, float, "s"),
)
BY_FIELD = {o.field: o for o in OPTIONS}


@dataclass(frozen=True)
class Point:
    """One run of a grid: its options, and the text of each swept option's value."""

    index: int
    opts: SimOptions
    swept: dict[str, str]  # field -> the value as given (only options with several values)

    @property
    def name(self) -> str:
        """The run folder's name: its number and swept values, in file-name characters."""
        parts = [f"{self.index + 1:03d}"]
        for field, text in self.swept.items():
            flag = BY_FIELD[field].flag.lstrip("-")
            parts.append(f"{flag}-{_safe(text)}")
        return "_".join(parts)


def _safe(text: str) -> str:
    return "".join(c if c.isalnum() or c in ".-" else "-" for c in text)[:40]


def _raw(args: argparse.Namespace, opt: GridOption, sweep: bool) -> list[str] | None:
    """The option's values as text; None: not given (the default applies)."""
    value = getattr(args, opt.dest)
    if value is None:
        return None
    if isinstance(value, list):  # --fail/--restore (append)
        if not value:
            return None
        if sweep and len(value) > 1:
            raise GridError(f"{opt.flag}: give it once in a sweep: alternatives separated by "
                            "commas, the failures of one run joined by +")
        if not sweep:
            if any("," in v for v in value):
                raise GridError(f"{opt.flag} {','.join(value)}: one value per run (comma "
                                "lists are for mrcnet sim sweep)")
            return ["+".join(value)]
        value = value[0]
    items = [v.strip() for v in str(value).split(",")]
    if not sweep and len(items) > 1:
        raise GridError(f"{opt.flag} {value}: one value per run (comma lists are for "
                        "mrcnet sim sweep)")
    if any(not v for v in items):
        raise GridError(f"{opt.flag} {value!r}: an empty value in the list")
    if len(set(items)) != len(items):
        raise GridError(f"{opt.flag} {value}: a value given twice")
    return items


def axes(args: argparse.Namespace, sweep: bool = True) -> dict[str, list[tuple[str, Any]]]:
    """Each given option's values, as (text, parsed value) pairs, in ``OPTIONS`` order."""
    out: dict[str, list[tuple[str, Any]]] = {}
    for opt in OPTIONS:
        items = _raw(args, opt, sweep)
        if items is None:
            continue
        values = []
        for text in items:
            try:
                values.append((text, opt.parse(text)))
            except ValueError as exc:
                raise GridError(f"{opt.flag} {text}: {exc}") from None
        out[opt.field] = values
    return out


def points(args: argparse.Namespace, sweep: bool = True) -> list[Point]:
    """Every combination of the given values, the last option varying fastest."""
    given = axes(args, sweep)
    swept = [f for f, vals in given.items() if len(vals) > 1]
    fields = list(given)
    out = []
    for i, combo in enumerate(itertools.product(*(given[f] for f in fields))):
        opts = replace(SimOptions(), **{f: v for f, (_t, v) in zip(fields, combo, strict=True)})
        texts = {f: t for f, (t, _v) in zip(fields, combo, strict=True)}
        out.append(Point(i, opts, {f: texts[f] for f in swept}))
    return out


def count(args: argparse.Namespace) -> int:
    """How many runs the grid has (before parsing any value)."""
    n = 1
    for opt in OPTIONS:
        items = _raw(args, opt, True)
        n *= len(items) if items else 1
    return n


def single(args: argparse.Namespace) -> SimOptions:
    """The options of one `mrcnet sim` run (GridError for a comma list or a bad value)."""
    (point,) = points(args, sweep=False)
    return point.opts
