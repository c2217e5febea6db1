"""The OS primitives create exactly what they are asked for and remove it all on close."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from common.netns import NetError, NetKit, run, wait_until

pytestmark = pytest.mark.emulation


def _namespaces() -> set[str]:
    return {line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line}


def test_veth_between_namespaces_carries_frames_and_close_removes_all(
    run_prefix: str, tmp_path: Path
) -> None:
    with NetKit(run_prefix) as kit:
        a = kit.add_namespace("a")
        b = kit.add_namespace("b")
        kit.add_veth(f"{run_prefix}a0", f"{run_prefix}b0", a, b)
        assert {a, b} <= _namespaces()
        # A raw frame sent in a arrives in b: capture with a python AF_PACKET socket in b.
        script = (
            "import socket,sys;s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW,socket.htons(0x88b5));"
            f"s.bind(('{run_prefix}b0',0));s.settimeout(5);print('ready',flush=True);"
            "print(s.recv(2048)[14:20].decode(),flush=True)"
        )
        sender = (
            "import socket;s=socket.socket(socket.AF_PACKET,socket.SOCK_RAW);"
            f"s.bind(('{run_prefix}a0',0));"
            "[s.send(b'\\xff'*6+b'\\x02'*6+b'\\x88\\xb5'+b'hello!'+bytes(40)) for _ in range(50)]"
        )
        log = tmp_path / "rx.log"
        proc = kit.spawn("rx", ["python3", "-c", script], netns=b, log_path=log)
        wait_until(lambda: "ready" in log.read_text(), 10, f"receiver readiness ({log})")
        run(["python3", "-c", sender], netns=a)
        proc.popen.wait(10)
        assert proc.popen.returncode == 0
        assert log.read_text().split() == ["ready", "hello!"]
    assert not ({a, b} & _namespaces())
    kit.close()  # idempotent


def test_bad_interface_name_is_rejected_and_nothing_is_left(run_prefix: str) -> None:
    kit = NetKit(run_prefix)
    try:
        kit.add_namespace("x")
        with pytest.raises(NetError):
            kit.add_veth("a" * 16, "b", None, None)
    finally:
        kit.close()
    assert f"{run_prefix}x" not in _namespaces()
    assert socket.if_nametoindex("lo") > 0
