"""The run's clock: virtual time that may run N times slower than the wall clock.

An emulation on a few cores is CPU-bound. Time dilation (DieCast, time-warped emulation) runs
every process of a run on one virtual clock that advances ``tdf`` (time-dilation factor)
times slower than the wall clock, so a virtual second of the experiment gets ``tdf`` wall
seconds of CPU. Link rates, delays, transport timers, measured RTTs and every figure of the
results are in virtual seconds; real sockets stay real.

``RunClock(tdf, epoch)``: ``epoch`` is one ``time.monotonic()`` reading taken by whoever
starts the run. CLOCK_MONOTONIC is system-wide (the same in every network namespace and
process), so every process that gets the same ``(tdf, epoch)`` computes the same virtual
time::

    now() = epoch + (time.monotonic() - epoch) / tdf

With ``tdf`` 1 ``now`` *is* ``time.monotonic`` (no extra cost on a hot path). Durations
convert with ``to_wall`` (virtual seconds -> wall seconds, for OS waits: select, epoll,
sleeps, condition waits) and ``to_virtual``. ``unix(t)`` maps a virtual instant to a
Unix-epoch timestamp that advances in virtual seconds (pcap and qlog stamps, progress
records), equal to ``time.time()`` at the epoch.

Children get the clock through the environment (``env()``: ``MRCNET_TDF``,
``MRCNET_CLOCK_EPOCH``; ``from_env()`` reads them) or through ``--tdf``/``--clock-epoch``
flags (``add_arguments``/``from_args``).
"""

from __future__ import annotations

import argparse
import math
import os
import time
from collections.abc import Callable, Mapping

ENV_TDF = "MRCNET_TDF"
ENV_EPOCH = "MRCNET_CLOCK_EPOCH"
MAX_TDF = 1e6


class ClockError(ValueError):
    """A time-dilation factor or epoch that cannot describe a clock."""


def check_tdf(value: float) -> float:
    """``value`` as a time-dilation factor, or ClockError (must be finite, in [1, 1e6])."""
    tdf = float(value)
    if not math.isfinite(tdf) or not 1.0 <= tdf <= MAX_TDF:
        raise ClockError(f"time-dilation factor must be a number in [1, {MAX_TDF:g}], got {value!r}")
    return tdf


class RunClock:
    """One run's virtual clock (see the module docstring). Immutable after construction."""

    __slots__ = ("_unix_epoch", "epoch", "now", "tdf", "unix_ns")

    now: Callable[[], float]
    """Virtual seconds on the run's clock (bound once: ``time.monotonic`` itself at TDF 1)."""
    unix_ns: Callable[[], int]
    """``unix()`` of now in integer nanoseconds (``time.time_ns`` itself at TDF 1)."""

    def __init__(self, tdf: float = 1.0, epoch: float | None = None) -> None:
        self.tdf = check_tdf(tdf)
        e = time.monotonic() if epoch is None else float(epoch)
        if not math.isfinite(e):
            raise ClockError(f"clock epoch must be a finite monotonic time, got {epoch!r}")
        self.epoch = e
        # Wall-clock Unix time of the epoch, from this process's view of both clocks.
        self._unix_epoch = time.time() - (time.monotonic() - e)
        if self.tdf == 1.0:
            self.now = time.monotonic
            self.unix_ns = time.time_ns
        else:
            mono = time.monotonic
            mono_ns = time.monotonic_ns
            inv = 1.0 / self.tdf
            epoch_ns = round(e * 1e9)
            unix_epoch_ns = round(self._unix_epoch * 1e9)

            def now() -> float:
                return e + (mono() - e) * inv

            def unix_ns() -> int:
                return unix_epoch_ns + int((mono_ns() - epoch_ns) * inv)

            self.now = now
            self.unix_ns = unix_ns

    def __repr__(self) -> str:
        return f"RunClock(tdf={self.tdf:g}, epoch={self.epoch:.6f})"

    @property
    def dilated(self) -> bool:
        return self.tdf != 1.0

    def to_wall(self, virtual_seconds: float) -> float:
        """Wall seconds an OS wait must last to cover ``virtual_seconds`` of the run."""
        return virtual_seconds * self.tdf

    def to_virtual(self, wall_seconds: float) -> float:
        """Virtual seconds that pass during ``wall_seconds`` of the wall clock."""
        return wall_seconds / self.tdf

    def wall_at(self, virtual_time: float) -> float:
        """The ``time.monotonic()`` reading at which the run's clock shows ``virtual_time``."""
        return self.epoch + (virtual_time - self.epoch) * self.tdf

    def sleep(self, virtual_seconds: float) -> None:
        if virtual_seconds > 0:
            time.sleep(virtual_seconds * self.tdf)

    def elapsed(self) -> float:
        """Virtual seconds since the epoch."""
        return self.now() - self.epoch

    def unix(self, virtual_time: float | None = None) -> float:
        """A Unix timestamp for ``virtual_time`` (default: now) that advances in virtual
        seconds from the wall-clock time of the epoch."""
        t = self.now() if virtual_time is None else virtual_time
        return self._unix_epoch + (t - self.epoch)

    def env(self) -> dict[str, str]:
        """What a parent passes to its children (``from_env`` reads it back)."""
        return {ENV_TDF: repr(self.tdf), ENV_EPOCH: repr(self.epoch)}

    def args(self) -> list[str]:
        """The same as command-line flags (``add_arguments``/``from_args``)."""
        return ["--tdf", repr(self.tdf), "--clock-epoch", repr(self.epoch)]

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> RunClock:
        """The clock described by ``MRCNET_TDF``/``MRCNET_CLOCK_EPOCH`` (defaults: TDF 1,
        epoch now); a malformed value raises ClockError naming the variable."""
        env = os.environ if environ is None else environ
        tdf_text = env.get(ENV_TDF, "").strip()
        epoch_text = env.get(ENV_EPOCH, "").strip()
        try:
            tdf = float(tdf_text) if tdf_text else 1.0
        except ValueError:
            raise ClockError(f"{ENV_TDF}={tdf_text!r} is not a number") from None
        try:
            epoch = float(epoch_text) if epoch_text else None
        except ValueError:
            raise ClockError(f"{ENV_EPOCH}={epoch_text!r} is not a number") from None
        return cls(tdf, epoch)

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> RunClock:
        """The clock of ``--tdf``/``--clock-epoch`` (see ``add_arguments``); unset flags fall
        back to the environment, then to TDF 1 / epoch now."""
        base = cls.from_env()
        tdf = base.tdf if args.tdf is None else args.tdf
        epoch = base.epoch if args.clock_epoch is None else args.clock_epoch
        return cls(tdf, epoch)


def _tdf_arg(text: str) -> float:
    try:
        return check_tdf(float(text))
    except (ValueError, ClockError) as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """``--tdf`` and ``--clock-epoch`` for a process of a run."""
    parser.add_argument("--tdf", type=_tdf_arg, default=None, metavar="N",
                        help=f"time-dilation factor of the run's clock (default: ${ENV_TDF} or 1)")
    parser.add_argument("--clock-epoch", type=float, default=None, metavar="T",
                        help=f"time.monotonic() reading the run's clock starts from "
                             f"(default: ${ENV_EPOCH} or now)")
