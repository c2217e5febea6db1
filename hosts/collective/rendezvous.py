"""How the GPUs of a collective meet: the controller's step barrier and a file exchange.

``ControllerBarrier`` calls ``MrcAgent.StepBarrier`` on the controller's socket (the agent's
own controller address); it blocks until the controller releases the step. ``FileExchange``
publishes this GPU's QP and memory details as one JSON record (``rank<r>``) in a directory
every GPU of the run can read and waits for the peers' records: the out-of-band files of
hosts/bulk/oob.py, as every bulk transfer uses them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import grpc

from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from hosts.bulk.oob import await_published, publish

POLL_S = 0.005


class RendezvousError(RuntimeError):
    """The barrier or the exchange failed (the message names the step or the peer)."""


class ControllerBarrier:
    def __init__(self, address: str, session: str, rank: int) -> None:
        self.session = session
        self.rank = rank
        self.channel = grpc.insecure_channel(address)
        self.stub = pb_grpc.MrcAgentStub(self.channel)

    def wait(self, step: int, timeout: float) -> float:
        try:
            resp = self.stub.StepBarrier(
                pb.StepBarrierRequest(session=self.session, rank=self.rank, step=step),
                timeout=timeout)
        except grpc.RpcError as exc:
            raise RendezvousError(f"barrier of step {step}: {exc.code().name} "  # type: ignore[attr-defined]
                                  f"{exc.details()}") from None  # type: ignore[attr-defined]
        return float(resp.released_s)

    def close(self) -> None:
        self.channel.close()


class FileExchange:
    def __init__(self, directory: str | Path, rank: int) -> None:
        self.dir = Path(directory)
        self.rank = rank

    def publish(self, info: dict[str, Any]) -> None:
        publish(self.dir, f"rank{self.rank}", info)

    def fetch(self, rank: int, timeout: float) -> dict[str, Any]:
        try:
            return await_published(self.dir, f"rank{rank}", timeout, POLL_S)
        except (TimeoutError, ValueError) as exc:
            raise RendezvousError(f"rank {rank}: {exc}") from None
