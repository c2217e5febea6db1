"""P4Runtime server: gRPC plumbing around the pipeline's control-plane state."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import grpc

from switch.pipeline import Pipeline


class P4RuntimeServer:
    """A running P4Runtime gRPC server bound to one Pipeline."""

    def __init__(self, pipeline: Pipeline, address: str, device_id: int) -> None:
        self.pipeline = pipeline
        self.address = address
        self.device_id = device_id
        self.port = 0
        self._server: grpc.Server | None = None

    def notify_port_status(self, port: int, up: bool) -> None:
        """Tell the primary controller (on its stream) that ``port`` went up or down."""

    def stop(self) -> None:
        """Stop serving; idempotent."""
        if self._server is not None:
            self._server.stop(grace=None)
            self._server = None


def start_server(
    pipeline: Pipeline,
    address: str,
    device_id: int,
    extra_servicers: Sequence[Callable[[grpc.Server], None]] = (),
) -> P4RuntimeServer:
    """Start the P4Runtime server on ``address`` ("host:port"; port 0 picks a free one)."""
    from concurrent import futures

    server = P4RuntimeServer(pipeline, address, device_id)
    grpc_server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))
    for add in extra_servicers:
        add(grpc_server)
    server.port = grpc_server.add_insecure_port(address)
    if server.port == 0:
        raise OSError(f"P4Runtime server: cannot bind {address}")
    grpc_server.start()
    server._server = grpc_server
    return server
