"""Errors of controller operations, independent of gRPC (the service maps them to codes)."""

from __future__ import annotations

from enum import Enum


class ErrorKind(Enum):
    INVALID = "INVALID_ARGUMENT"  # malformed request or operation not allowed in this state
    NOT_FOUND = "NOT_FOUND"  # unknown profile, EV, host, port, link, agent
    BUSY = "FAILED_PRECONDITION"  # something else depends on it (mrc_ctl EBUSY)
    UNAVAILABLE = "UNAVAILABLE"  # a switch could not apply the change (nothing recorded)


class CtlError(Exception):
    """A rejected controller request; nothing was changed."""

    def __init__(self, kind: ErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def invalid(message: str) -> CtlError:
    return CtlError(ErrorKind.INVALID, message)


def not_found(message: str) -> CtlError:
    return CtlError(ErrorKind.NOT_FOUND, message)


def busy(message: str) -> CtlError:
    return CtlError(ErrorKind.BUSY, message)
