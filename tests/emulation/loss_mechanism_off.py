"""A pytest plugin that switches one transport mechanism off, to show that a mechanism test
fails without it (``MRC_MECHANISM_OFF=<name> pytest -p tests.emulation.loss_mechanism_off
tests/emulation/test_mechanisms_loss.py``). The agents of testbed/mechanism_lab.py run in the
test's process, so patching the transport classes here reaches both hosts. Names:

- ``sack_gap``: no loss inference from SACKs at all (fast and time-based; probes and the ACK
  timeout still recover);
- ``fast_loss``: the reordering-threshold detector never declares a loss;
- ``time_loss``: the time-based (RACK-like) detection never fires (its window is endless);
- ``go_back``: the RC requester ignores NAKs (the ACK timeout still recovers);
- ``nack_<reason>`` (``nack_no_bitmap``, ``nack_no_pkt_buffer``, ``nack_psn_oor_window``,
  ``nack_no_resource``, ``nack_trimmed``, ``nack_unexp_event``): the responder drops the
  packet without sending that NACK;
- ``rx_limits``: the receive-resource limits are never enforced.

Not a test module: nothing here runs unless the plugin is named on the command line.
"""

from __future__ import annotations

import os
from typing import Any

from hosts.transport import loss, recovery, responder
from hosts.transport.counters import nack_reason_name

OFF = os.environ.get("MRC_MECHANISM_OFF", "")


def _apply(name: str) -> None:
    if name == "sack_gap":
        def probes_only(self: Any, now: float, probe_base: int | None) -> None:
            if probe_base is not None and self.probe_time > 0:
                self._probe_inference(probe_base, now)

        recovery.Recovery.detect_losses = probes_only  # type: ignore[method-assign]
    elif name == "fast_loss":
        loss.ReorderThreshold.is_lost = lambda self, txseq: False  # type: ignore[method-assign]
    elif name == "time_loss":
        init = recovery.Recovery.__init__

        def endless(self: Any, *args: Any, **kwargs: Any) -> None:
            init(self, *args, **kwargs)
            self.reo_mult = float("inf")

        recovery.Recovery.__init__ = endless  # type: ignore[method-assign]
        recovery.K_REO_MULT_MAX = float("inf")
    elif name == "go_back":
        recovery.Recovery.go_back = lambda self: None  # type: ignore[method-assign]
    elif name.startswith("nack_"):
        reason = name[len("nack_"):]
        nack = responder.Responder._nack

        def quiet(self: Any, code: int, *args: Any) -> None:
            if nack_reason_name(code) != reason:
                nack(self, code, *args)

        responder.Responder._nack = quiet  # type: ignore[method-assign, assignment]
    elif name == "rx_limits":
        responder.Responder._refuse = lambda self, *args: False  # type: ignore[method-assign]
    elif name:
        raise ValueError(f"MRC_MECHANISM_OFF: unknown mechanism {name!r}")


_apply(OFF)
