"""The controller's logic on the simulated clock.

What the controller process does for a packet run, with the same code:

- profiles: the run's EV profile 1 (and, with NSCC, CC profile 1) are the requests
  ``mrcnet up`` sends (mrcnet/fabric/ctlclient.py), applied to the controller's
  ``ProfileStore``; every host gets the store's snapshot, turned into core profiles by the
  agent's conversion (hosts/agent/ctlprofiles.py), as at registration;
- link changes: ``--fail``/``--restore`` go through the controller's ``FabricState``
  (SetLinkState) to its southbound, here ``SimSouthbound``: both switch ends go down or up
  and report the port change, as the switches' P4Runtime streams do;
- convergence: ``controller.convergence.Convergence`` recomputes routes ``cp_delay`` simulated
  seconds after each port change and writes them through P4Runtime sessions that are the
  simulator's ``InProcessWriter`` (the same messages, minus the channel).

What it does not model: the latency of the controller's own messages (profiles are in place
before the first QP is created; a port change reaches the convergence logic at once).
"""

from __future__ import annotations

from collections.abc import Callable

from common.proto import mrc_ctl_pb2 as pb
from controller.convergence import Convergence
from controller.fabric import BackendError, FabricState
from controller.profile_store import ProfileStore
from hosts.agent.ctlprofiles import core_cc_profile, core_ev_profile
from mrcnet.fabric.ctlclient import ProfileRequest, cc_profile_requests, ev_profile_requests
from mrcnet.sim.fabric import SimFabric
from mrcnet.sim.hostnode import SimHost
from topologies.model import Link

PortListener = Callable[[str, int, bool], None]  # (switch, port, up)


class SimSouthbound:
    """The controller's southbound (controller.fabric.FabricBackend) for simulated switches:
    port admin state on the switch objects, port changes reported to ``listeners``."""

    def __init__(self, fabric: SimFabric) -> None:
        self.fabric = fabric
        self.listeners: list[PortListener] = []
        self.link_changes = 0

    def set_link_state(self, link: Link, up: bool) -> None:
        ends = [e for e in (link.a, link.b) if e.node in self.fabric.switches]
        for end in ends:
            self.fabric.switches[end.node].set_port(end.port, up)
        self.link_changes += 1
        for end in ends:
            for listener in self.listeners:
                listener(end.node, end.port, up)

    def apply_circuits(self, cross_connects: dict[int, int]) -> None:
        raise BackendError("the simulator has no optical circuit switch")

    def darken(self, ports: list[int]) -> None:
        raise BackendError("the simulator has no optical circuit switch")

    def read_circuits(self) -> dict[int, int]:
        return {}

    def stats(self) -> dict[str, int]:
        return {"switch_link_changes": self.link_changes}


class SimController:
    """The run's profiles, link changes and (with ``cp_delay``) route convergence."""

    def __init__(self, fabric: SimFabric, cp_delay: float | None = None, lb: str = "rotation",
                 nscc_base_rtt: float | None = None) -> None:
        """``nscc_base_rtt``: bring CC profile 1 (NSCC scaled for this base RTT) ONLINE;
        None: no CC profile (the fixed window)."""
        topo = fabric.topo
        self.fabric = fabric
        self.store = ProfileStore(topo.fabric.planes)
        self.nscc: pb.NsccConfig | None = None
        requests = ev_profile_requests(topo, fabric.mode, lb)
        if nscc_base_rtt is not None:
            cc_requests, self.nscc = cc_profile_requests(topo, nscc_base_rtt)
            requests += cc_requests
        for req in requests:
            self._apply(req)
        self.southbound = SimSouthbound(fabric)
        self.links = FabricState(topo, self.southbound)
        self.log: list[str] = []  # the convergence lines the controller's log would have
        self.convergence: Convergence | None = None
        if cp_delay is not None:
            sched = fabric.sched
            writers = {name: fabric.writer(name) for name in fabric.switches}

            def later(delay: float, fn: Callable[[], object]) -> None:
                def run() -> None:
                    fn()

                sched.after(delay, run)

            self.convergence = Convergence(
                topo, fabric.tables, writers, cp_delay, later=later, stamp=sched.clock,
                say=lambda line, t: self.log.append(f"convergence t={t:.9f} {line}"))
            self.southbound.listeners.append(self.convergence.port_changed)

    def _apply(self, req: ProfileRequest) -> None:
        if isinstance(req, pb.ModifyEvFmtProfileRequest):
            self.store.modify_fmt(req)
        elif isinstance(req, pb.ModifyEvProfileRequest):
            self.store.modify_ev(req)
        else:
            self.store.modify_cc(req)

    def install(self, host: SimHost) -> None:
        """The controller's profiles into ``host``'s core, as its agent installs the snapshot
        it gets at registration."""
        snap = self.store.snapshot()
        for prof in snap.ev_profiles:
            core_prof = core_ev_profile(prof, host.config.ev_mode,
                                        {int(e.value) for e in prof.denied})
            if core_prof is not None:
                host.core.set_ev_profile(core_prof)
        for cc in snap.cc_profiles:
            host.core.set_cc_profile(core_cc_profile(cc))

    def set_links(self, links: tuple[Link, ...], up: bool) -> None:
        """Links down or up through the controller (SetLinkState on one end of each), as the
        orchestrator's ``set_links`` asks the controller process."""
        for link in links:
            self.links.set_link(str(link.a), up)
