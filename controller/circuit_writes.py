"""The OCS's cross_connect writes (p4/ocs.p4), as P4Runtime updates: what the controller's
southbound (controller/southbound.py) writes to a switch over gRPC and the simulator
(mrcnet/sim/ocs.py) applies in process. Pure message building: no session, no driver.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from common.p4runtime_client import EntityWriter
from common.proto.p4.v1 import p4runtime_pb2

CROSS_CONNECT = "OcsIngress.cross_connect"
INGRESS_PORT = "standard_metadata.ingress_port"
CONNECT = "OcsIngress.connect"
DARK = "OcsIngress.dark"  # the action an input port holds while its mirror moves


def dark_updates(client: EntityWriter, current: Mapping[int, int], ports: Iterable[int]
                 ) -> list[p4runtime_pb2.Update]:
    """The Write that darkens OCS input ``ports`` (their cross_connect entries become the
    dark action), given the entries ``current`` holds (input -> output, -1: dark)."""
    Update = p4runtime_pb2.Update
    updates = []
    for port in sorted(ports):
        kind = Update.MODIFY if port in current else Update.INSERT
        te = client.table_entry(CROSS_CONNECT, {INGRESS_PORT: port}, DARK, {})
        updates.append(client.update(kind, table_entry=te))
    return updates


def circuit_updates(client: EntityWriter, current: Mapping[int, int],
                    cross_connects: Mapping[int, int]) -> list[p4runtime_pb2.Update]:
    """Only the difference from ``current`` to ``cross_connects`` (input -> output port):
    DELETE, MODIFY, INSERT in one Write."""
    Update = p4runtime_pb2.Update
    updates = []
    for port in sorted(set(current) - set(cross_connects)):
        te = client.table_entry(CROSS_CONNECT, {INGRESS_PORT: port})
        updates.append(client.update(Update.DELETE, table_entry=te))
    for port, out in sorted(cross_connects.items()):
        if current.get(port) == out:
            continue
        kind = Update.MODIFY if port in current else Update.INSERT
        te = client.table_entry(CROSS_CONNECT, {INGRESS_PORT: port}, CONNECT, {"port": out})
        updates.append(client.update(kind, table_entry=te))
    return updates


def connects_of(connect_id: int, entries: Iterable[p4runtime_pb2.TableEntry]
                ) -> dict[int, int]:
    """The cross-connects (input -> output port) of read-back cross_connect entries whose
    action (id ``connect_id``) connects; dark and dropping ports are left out."""
    out = {}
    for te in entries:
        if te.action.action.action_id != connect_id:
            continue
        port = int.from_bytes(te.match[0].exact.value, "big")
        out[port] = int.from_bytes(te.action.action.params[0].value, "big")
    return out


__all__ = ["CONNECT", "CROSS_CONNECT", "DARK", "INGRESS_PORT", "circuit_updates", "connects_of",
           "dark_updates"]
