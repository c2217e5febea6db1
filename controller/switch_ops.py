"""Switch reads and captures for clients of the controller (MrcFabric GetSwitchStats,
ReadCounters, StartSwitchCapture, StopSwitchCapture).

The controller owns every switch's P4Runtime session and admin channel; the live view, the
fidelity monitor, captures and the collective driver ask it through these calls. Each one
goes to the switch's driver (controller/drivers/), so a reader never needs to know a
switch's kind. A controller without switches (no ``--switches``) answers
FAILED_PRECONDITION; an unknown switch NOT_FOUND; a switch that could not be read is an
``error`` in its entry of GetSwitchStats (never figures of zero).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from common.proto import mrc_ctl_pb2 as pb
from common.proto import switch_admin_pb2 as admin_pb
from controller.drivers import SwitchDriver, SwitchFigures
from controller.errors import CtlError, ErrorKind, busy, invalid, not_found
from controller.southbound import SouthboundError


class SwitchAccess(Protocol):
    """What the southbound offers (controller/southbound.py SwitchFabric)."""

    drivers: dict[str, SwitchDriver]

    def switch_figures(self, names: Sequence[str] = (), detail: bool = False
                       ) -> dict[str, SwitchFigures | str]: ...
    def read_counter(self, switch: str, counter: str, indexes: Sequence[int] = ()
                     ) -> dict[int, tuple[int, int]]: ...
    def start_capture(self, switch: str, port: int, path: str, direction: int, snaplen: int
                      ) -> admin_pb.CaptureInfo: ...
    def stop_capture(self, switch: str, port: int) -> admin_pb.CaptureInfo: ...


class SwitchOps:
    def __init__(self, backend: object) -> None:
        self.access: SwitchAccess | None = (
            backend if hasattr(backend, "switch_figures") else None)  # type: ignore[assignment]

    def _access(self) -> SwitchAccess:
        if self.access is None:
            raise busy("the controller operates no switches (started without --switches)")
        return self.access

    def _known(self, switch: str) -> SwitchDriver:
        drivers = self._access().drivers
        if switch not in drivers:
            raise not_found(f"no switch {switch!r}; known: {', '.join(sorted(drivers))}")
        return drivers[switch]

    def stats(self, req: pb.GetSwitchStatsRequest) -> pb.GetSwitchStatsResponse:
        access = self._access()
        for name in req.switches:
            self._known(name)
        out = pb.GetSwitchStatsResponse()
        for name, figures in access.switch_figures(list(req.switches), req.detail).items():
            entry = out.switches.add(name=name, kind=access.drivers[name].kind)
            if isinstance(figures, str):
                entry.error = figures
                continue
            for port, nbytes in figures.egress_bytes.items():
                entry.egress_bytes[port] = nbytes
            entry.drops, entry.trims, entry.ecn_marks = figures.drops, figures.trims, figures.ecn
            if figures.timing is not None:
                entry.has_timing = True
                entry.timing.CopyFrom(figures.timing)
            if figures.detail is not None:
                entry.detail.CopyFrom(figures.detail)
        return out

    def read_counters(self, req: pb.ReadCountersRequest) -> pb.ReadCountersResponse:
        self._known(req.switch)
        try:
            cells = self._access().read_counter(req.switch, req.counter, list(req.indexes))
        except ValueError as exc:  # no such counter in the switch's program
            raise invalid(str(exc)) from None
        except SouthboundError as exc:
            raise CtlError(ErrorKind.UNAVAILABLE, str(exc)) from None
        out = pb.ReadCountersResponse()
        for index, (packets, nbytes) in sorted(cells.items()):
            out.cells.add(index=index, packets=packets, bytes=nbytes)
        return out

    def capture(self, req: pb.SwitchCaptureRequest, start: bool) -> admin_pb.CaptureInfo:
        self._known(req.switch)
        try:
            if start:
                return self._access().start_capture(req.switch, req.port, req.path,
                                                    req.direction, req.snaplen)
            return self._access().stop_capture(req.switch, req.port)
        except SouthboundError as exc:
            raise CtlError(ErrorKind.UNAVAILABLE, str(exc)) from None
