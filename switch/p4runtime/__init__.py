"""P4Runtime gRPC server of the embedded target (see docs/switch.md)."""

from switch.p4runtime.server import P4RuntimeServer, start_server

__all__ = ["P4RuntimeServer", "start_server"]
