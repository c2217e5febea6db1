"""The controller's profiles as the transport core takes them.

An EV profile the controller distributes (``pb.EvProfile``: EVs as value@1-based port, its
denied EVs, ``ev_min_active``, ``lb_policy``) becomes an explicit core ``EvProfile`` (port
index = port - 1), leaving out the denied EVs so QPs created while one is denied never use
it; a CC profile becomes a core ``CcProfile`` with its NSCC parameters by name. The
simulator (mrcnet/sim/control.py) installs these from the controller's profile store and the
agent's controller link (ctl_link.py) from the controller's stream: one conversion.
"""

from __future__ import annotations

from collections.abc import Collection

from common.proto import mrc_ctl_pb2 as pb
from hosts.transport import CcProfile, EvEntry, EvProfile, EvProfileMode
from hosts.wire import EvMode


def core_ev_profile(prof: pb.EvProfile, path_mode: EvMode,
                    denied: Collection[int] = ()) -> EvProfile | None:
    """The core's explicit profile of ``prof`` without the ``denied`` EV values; None when no
    EV is left."""
    entries = [EvEntry(int(e.value), int(e.port) - 1) for e in prof.evs
               if e.port >= 1 and int(e.value) not in denied]
    if not entries:
        return None
    return EvProfile(profile_id=int(prof.id), mode=EvProfileMode.EXP, path_mode=path_mode,
                     entries=entries, ev_min_active=max(1, int(prof.ev_min_active)),
                     spray=prof.lb_policy or "rotation")


def core_cc_profile(cc: pb.CcProfile) -> CcProfile:
    """The core's CC profile of ``cc``: its algorithm and NSCC parameters by name."""
    return CcProfile(int(cc.id), cc.algorithm, {f.name: float(v) for f, v in cc.nscc.ListFields()})
