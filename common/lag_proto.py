"""A lag meter's snapshot (common/lag.py ``LagMeter.snapshot``) and its wire form, the
``Timing`` message of common/proto/switch_admin.proto, which switches send and the
controller relays (MrcFabric GetSwitchStats)."""

from __future__ import annotations

from typing import Any

from common.proto import switch_admin_pb2 as pb


def timing_snapshot(msg: pb.Timing) -> dict[str, Any]:
    """A Timing message as the LagMeter.snapshot dict it came from (for common.lag.window)."""
    return {"t": msg.now, "start": msg.start, "tdf": msg.tdf, "tolerance_s": msg.tolerance_s,
            "events": msg.events, "late": msg.late, "behind_s": msg.behind_s,
            "idle_s": msg.idle_s, "max_lag_s": msg.max_lag_s, "late_hist": list(msg.late_hist),
            "wakeups": msg.wakeups, "moderated": msg.moderated, "slack_s": msg.slack_s,
            "loop_cpu_s": msg.loop_cpu_s}
