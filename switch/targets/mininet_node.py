"""A Mininet switch node backed by a switch target of any kind.

``net.addSwitch(name, cls=P4Switch, target=EmbeddedSwitch(...))``: Mininet makes the node and
its interfaces; ``start`` starts the target (in the node's namespace when the node has one),
``connected()`` is the target's readiness (so ``Mininet.waitConnected`` agrees with it) and
``stop`` stops the target before Mininet removes the interfaces. The interface names the
target was given must be the ones Mininet creates for the node's links.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from mininet.node import Switch

from common.netns import Process
from switch.targets.base import ProcessSwitch, SwitchTarget, local_launcher


class P4Switch(Switch):  # type: ignore[misc]
    def __init__(self, name: str, target: SwitchTarget, **params: Any) -> None:
        params.setdefault("inNamespace", False)
        super().__init__(name, **params)
        self.target = target
        if self.inNamespace and isinstance(target, ProcessSwitch):
            target.launcher = self._launch_in_node

    def _launch_in_node(self, label: str, argv: Sequence[str], log_path: Path) -> Process:
        return local_launcher(label, ["mnexec", "-a", str(self.pid), *argv], log_path)

    def port_map(self) -> dict[int, str]:
        """Mininet's port number -> interface name (the loopback excluded)."""
        return {port: intf.name for port, intf in sorted(self.intfs.items()) if intf.name != "lo"}

    def start(self, controllers: Any) -> None:
        mine = self.port_map()
        if mine and mine != self.target.ports:
            raise ValueError(f"{self.name}: Mininet made ports {mine}, the target was given "
                             f"{self.target.ports}")
        self.target.start()

    def connected(self) -> bool:
        return self.target.connected()

    def stop(self, deleteIntfs: bool = True) -> None:
        self.target.stop()
        super().stop(deleteIntfs)
