"""StreamChannel arbitration (role-less): election ids, primary and backups, notifications.

Follows simple_switch_grpc (PI): the connection with the highest election id is primary;
a duplicate election id closes the new stream with INVALID_ARGUMENT; when the primary
changes every connection is told who the primary is (OK to the primary, ALREADY_EXISTS to
backups); a new backup is told alone.
"""

from __future__ import annotations

import itertools
import queue
import threading
from dataclasses import dataclass, field

from google.rpc import code_pb2

from common.proto.p4.v1 import p4runtime_pb2

MAX_CONNECTIONS = 16


class ArbitrationError(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


_ids = itertools.count(1)


@dataclass(eq=False)
class Connection:
    """One StreamChannel: its election id and its outgoing message queue."""

    election_id: int
    outbox: queue.Queue[p4runtime_pb2.StreamMessageResponse | None] = field(
        default_factory=queue.Queue
    )
    ident: int = field(default_factory=lambda: next(_ids))


def to_u128(value: int) -> p4runtime_pb2.Uint128:
    return p4runtime_pb2.Uint128(high=value >> 64, low=value & ((1 << 64) - 1))


def from_u128(msg: p4runtime_pb2.Uint128) -> int:
    return (msg.high << 64) | msg.low


class Arbiter:
    def __init__(self, device_id: int) -> None:
        self.device_id = device_id
        self.lock = threading.Lock()
        self.connections: list[Connection] = []

    def _primary(self) -> Connection | None:
        return max(self.connections, key=lambda c: c.election_id, default=None)

    def count(self) -> int:
        with self.lock:
            return len(self.connections)

    def is_primary(self, election_id: int) -> bool:
        with self.lock:
            primary = self._primary()
            return primary is not None and primary.election_id == election_id

    def _notify(self, conn: Connection, primary: Connection) -> None:
        resp = p4runtime_pb2.StreamMessageResponse()
        arb = resp.arbitration
        arb.device_id = self.device_id
        arb.election_id.CopyFrom(to_u128(primary.election_id))
        if conn is primary:
            arb.status.code = code_pb2.OK
            arb.status.message = "Is primary"
        else:
            arb.status.code = code_pb2.ALREADY_EXISTS
            arb.status.message = "Is backup"
        conn.outbox.put(resp)

    def _notify_all(self) -> None:
        primary = self._primary()
        if primary is not None:
            for conn in self.connections:
                self._notify(conn, primary)

    def add(self, conn: Connection) -> None:
        with self.lock:
            if len(self.connections) >= MAX_CONNECTIONS:
                raise ArbitrationError(code_pb2.RESOURCE_EXHAUSTED, "Too many connections")
            if any(c.election_id == conn.election_id for c in self.connections):
                raise ArbitrationError(code_pb2.INVALID_ARGUMENT, "Election id already exists")
            self.connections.append(conn)
            primary = self._primary()
            assert primary is not None
            if primary is conn:
                self._notify_all()
            else:
                self._notify(conn, primary)

    def update(self, conn: Connection, election_id: int) -> None:
        with self.lock:
            if conn.election_id == election_id:
                primary = self._primary()
                assert primary is not None
                self._notify(conn, primary)
                return
            if any(c.election_id == election_id for c in self.connections if c is not conn):
                raise ArbitrationError(
                    code_pb2.INVALID_ARGUMENT, "New election id already exists"
                )
            was_primary = self._primary() is conn
            conn.election_id = election_id
            is_primary = self._primary() is conn
            if was_primary != is_primary:
                self._notify_all()
            else:
                primary = self._primary()
                assert primary is not None
                self._notify(conn, primary)

    def remove(self, conn: Connection) -> None:
        with self.lock:
            if conn not in self.connections:
                return
            was_primary = self._primary() is conn
            self.connections.remove(conn)
            if was_primary:
                self._notify_all()

    def send_to_primary(self, msg: p4runtime_pb2.StreamMessageResponse) -> bool:
        with self.lock:
            primary = self._primary()
            if primary is None:
                return False
            primary.outbox.put(msg)
            return True

    def close_all(self) -> None:
        with self.lock:
            for conn in self.connections:
                conn.outbox.put(None)
            self.connections.clear()
