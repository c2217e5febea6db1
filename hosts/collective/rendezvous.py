"""How the GPUs of a collective meet: the controller's step barrier and a file exchange.

``ControllerBarrier`` calls ``MrcAgent.StepBarrier`` on the controller's socket (the agent's
own controller address); it blocks until the controller releases the step. ``FileExchange``
publishes this GPU's QP and memory details as one JSON file in a directory every GPU of the
run can read (written atomically) and waits for the peers' files.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

import grpc

from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc

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

    def _path(self, rank: int) -> Path:
        return self.dir / f"rank{rank}.json"

    def publish(self, info: dict[str, Any]) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        path = self._path(self.rank)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(info))
        os.replace(tmp, path)

    def fetch(self, rank: int, timeout: float) -> dict[str, Any]:
        path = self._path(rank)
        deadline = time.monotonic() + timeout
        while True:
            try:
                data: dict[str, Any] = json.loads(path.read_text())
                return data
            except FileNotFoundError:
                if time.monotonic() >= deadline:
                    raise RendezvousError(f"rank {rank} did not publish {path} within "
                                          f"{timeout:g} s") from None
                time.sleep(POLL_S)
