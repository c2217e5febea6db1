"""Registered host agents and their command channels.

An agent registers (host name, NIC ports with GIDs) and gets an id; it then opens the
AgentChannel stream and attaches with that id. Everything the controller tells agents goes
through a per-agent outbox drained by that stream: first a full profile snapshot, then
updates in the order they were made. If an agent falls too far behind, its channel is closed;
on re-attach it receives a fresh snapshot, so it can never act on a partial history.
"""

from __future__ import annotations

import ipaddress
import itertools
import queue
import secrets
from dataclasses import dataclass, field

from common.proto import mrc_ctl_pb2 as pb
from controller.errors import invalid, not_found

OUTBOX_LIMIT = 10_000


@dataclass
class RegisteredAgent:
    """A host agent as the controller knows it once it registered (not the agent process,
    hosts.agent.agent.Agent): its ports, capabilities and the queue of messages to it."""

    agent_id: str
    host: str
    ports: dict[int, pb.AgentPort]
    capabilities: tuple[str, ...]
    outbox: queue.Queue[pb.ControllerMessage | None] = field(default_factory=queue.Queue)
    attached: bool = False
    epoch: int = 0  # increments on every attach; a stale stream stops when it differs
    ev_reports: int = 0
    ep_results: int = 0
    dropped_channels: int = 0

    def gid_port(self, gid: ipaddress.IPv6Address) -> int | None:
        for port, p in self.ports.items():
            if ipaddress.IPv6Address(p.gid) == gid:
                return port
        return None

    def send(self, msg: pb.ControllerMessage | None) -> bool:
        """Queue a message; closes the channel (returns False) when the agent is too far behind."""
        if not self.attached:
            return False
        if self.outbox.qsize() >= OUTBOX_LIMIT:
            self.dropped_channels += 1
            self.detach()
            return False
        self.outbox.put(msg)
        return True

    def detach(self) -> None:
        self.attached = False
        self.epoch += 1
        self.outbox.put(None)  # wakes the stream, which sees the epoch change and ends


class AgentRegistry:
    """Not thread-safe on its own: the controller state lock serialises access."""

    def __init__(self) -> None:
        self._agents: dict[str, RegisteredAgent] = {}
        self._by_host: dict[str, str] = {}
        self._ids = itertools.count(1)

    def register(self, req: pb.RegisterAgentRequest, max_port: int
                 ) -> tuple[RegisteredAgent, RegisteredAgent | None]:
        """Validate and register; returns (new agent, replaced agent of the same host or None)."""
        if not req.host:
            raise invalid("RegisterAgent: host is empty")
        ports: dict[int, pb.AgentPort] = {}
        for p in req.ports:
            if not 1 <= p.port <= max_port:
                raise invalid(f"RegisterAgent {req.host}: port {p.port} outside 1..{max_port}")
            if p.port in ports:
                raise invalid(f"RegisterAgent {req.host}: port {p.port} listed twice")
            try:
                ipaddress.IPv6Address(p.gid)
            except ValueError:
                raise invalid(
                    f"RegisterAgent {req.host}: port {p.port} GID {p.gid!r} is not IPv6"
                ) from None
            ports[p.port] = p
        if not ports:
            raise invalid(f"RegisterAgent {req.host}: no ports")
        for other in self._agents.values():
            if other.host == req.host:
                continue
            for p in ports.values():
                if other.gid_port(ipaddress.IPv6Address(p.gid)) is not None:
                    raise invalid(
                        f"RegisterAgent {req.host}: GID {p.gid} is registered by {other.host}"
                    )
        agent_id = f"{req.host}-{next(self._ids)}-{secrets.token_hex(4)}"
        agent = RegisteredAgent(agent_id, req.host, ports, tuple(req.capabilities))
        old = self.remove_host(req.host)
        self._agents[agent_id] = agent
        self._by_host[req.host] = agent_id
        return agent, old

    def remove_host(self, host: str) -> RegisteredAgent | None:
        old_id = self._by_host.pop(host, None)
        if old_id is None:
            return None
        old = self._agents.pop(old_id)
        old.detach()
        return old

    def get(self, agent_id: str) -> RegisteredAgent:
        try:
            return self._agents[agent_id]
        except KeyError:
            raise not_found(f"no registered agent {agent_id!r} (register first)") from None

    def by_host(self, host: str) -> RegisteredAgent | None:
        agent_id = self._by_host.get(host)
        return self._agents.get(agent_id) if agent_id else None

    def owner_of(self, gid: ipaddress.IPv6Address) -> tuple[RegisteredAgent, int] | None:
        for agent in self._agents.values():
            port = agent.gid_port(gid)
            if port is not None:
                return agent, port
        return None

    def broadcast(self, msgs: list[pb.ControllerMessage]) -> None:
        for agent in list(self._agents.values()):
            for msg in msgs:
                if not agent.send(msg):
                    break

    def all(self) -> list[RegisteredAgent]:
        return list(self._agents.values())
