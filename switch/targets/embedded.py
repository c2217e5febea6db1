"""The project's embedded P4 target as a switch node: ``python -m switch.main``.

It shapes both directions of every link itself (egress and ingress link specs), runs on the
run's clock (dilated or not), keeps a lag meter and serves the switch admin service beside
P4Runtime (ports, statistics, captures, timing).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from switch.targets.base import ProcessSwitch


class EmbeddedSwitch(ProcessSwitch):
    kind = "embedded"
    label = "embedded switch"
    takes_run_flags = True

    def __init__(self, *args: Any, python: str = sys.executable,
                 extra_args: Sequence[str] = (), **kwargs: Any) -> None:
        """``extra_args``: more flags of ``switch.main`` (the run's clock, the receive ring)."""
        super().__init__(*args, **kwargs)
        self.python = python
        self.extra_args = tuple(extra_args)

    def command(self) -> list[str]:
        assert self.log_path is not None
        cmd = [self.python, "-m", "switch.main", "--name", self.name,
               "--grpc-addr", self.grpc_address, "--device-id", str(self.device_id),
               "--log", str(self.log_path)]
        for number, ifname in sorted(self.ports.items()):
            cmd += ["--port", f"{number}={ifname}"]
        for number, spec in sorted(self.links.items()):
            cmd += ["--link", f"{number}:{spec}"]
        for number, spec in sorted(self.ingress_links.items()):
            cmd += ["--ingress-link", f"{number}:{spec}"]
        if self.default_link:
            cmd += ["--default-link", self.default_link]
        return cmd + list(self.extra_args)
