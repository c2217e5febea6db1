"""Hostile input against running processes, each a counted drop or a clear error that
changes nothing:

- malformed and truncated frames (and well-formed ones for QPs and requests that do not
  exist) at full rate, from a third host into a switch port and straight into an agent's NIC
  port, while a real transfer crosses the same switch and port: the transfer stays byte-exact,
  every junk frame the agent's socket filter admits is counted somewhere, the ones it keeps
  out (another UDP port, cut before the UDP port, not UDP) never reach the agent, nothing
  crashes;
- the operator API over TCP with a wrong token or none (every MrcCtl RPC: UNAUTHENTICATED,
  nothing applied), and over its unix socket from a foreign uid (the kernel refuses the
  connection: the socket is mode 0600).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import grpc
import pytest

from common.netns import NetKit, free_tcp_port, wait_until
from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from hosts.wire import (
    ENDPOINT_QP,
    Bth,
    CcState,
    Eeth,
    Erth,
    Frame,
    Meth,
    MrcPacket,
    Neth,
    Opcode,
    Peth,
    Reth,
    Seth,
    encode_frame,
    ip6,
    mac,
)
from testbed.flood import write_frames
from testbed.host_lab import SwitchHandle, host_mac, switch_mac
from testbed.mechanism_lab import StarLab

pytestmark = pytest.mark.emulation

MiB = 1 << 20
REPO = Path(__file__).resolve().parents[2]
BOGUS_QP = 0xABCDE


def _frame(dst_mac: str, src_mac: str, src: str, dst: str, pkt: MrcPacket,
           dport: int = 4791) -> bytes:
    buf = bytearray(9216)
    n = encode_frame(Frame(eth_dst=mac(dst_mac), eth_src=mac(src_mac), ip_src=ip6(src),
                           ip_dst=ip6(dst), udp_sport=0xC000, udp_dport=dport), pkt, buf)
    return bytes(buf[:n])


def _junk(dst_mac: str, src_mac: str, src: str, dst: str) -> dict[str, list[bytes]]:
    """Frames a host must not act on, by the counter that should see them."""
    write = MrcPacket(Bth(opcode=Opcode.WRITE_ONLY, dest_qp=BOGUS_QP, psn=5),
                      meth=Meth(0, 0), reth=Reth(0x1000, 0x1234, 4096), payload=bytes(4096))
    good = _frame(dst_mac, src_mac, src, dst, write)
    corrupt = bytearray(good)
    corrupt[200] ^= 0xFF  # payload byte: the ICRC no longer matches
    eth = good[:12]
    unknown_qp = [good] + [_frame(dst_mac, src_mac, src, dst, p) for p in (
        MrcPacket(Bth(opcode=Opcode.SACK, dest_qp=BOGUS_QP, psn=1), seth=Seth(cack_psn=1),
                  cc_state=CcState()),
        MrcPacket(Bth(opcode=Opcode.NACK, dest_qp=BOGUS_QP, psn=1), neth=Neth(reason=1)),
        MrcPacket(Bth(opcode=Opcode.PROBE, dest_qp=BOGUS_QP, psn=1), peth=Peth(1, 0)))]
    return {
        "malformed": [good[:n] for n in (14, 30, 54, 58, 62, 66, 70, 80, 100, len(good) - 4)]
        + [bytes(corrupt)] + [eth + b"\x86\xdd" + secrets.token_bytes(n) for n in (1, 40, 300)],
        "not_mrc": [_frame(dst_mac, src_mac, src, dst, write, dport=4792)],
        "not_for_us": [_frame(dst_mac, src_mac, src, "fd00:0:0::99", write)],
        "not_ipv6": [eth + b"\x08\x00" + secrets.token_bytes(60)],
        "unknown_qp": unknown_qp,
        "ep_bad_op": [_frame(dst_mac, src_mac, src, dst, MrcPacket(
            Bth(opcode=Opcode.EP_REQUEST, dest_qp=ENDPOINT_QP, psn=9), erth=Erth(op=3)))],
        "ep_stale": [_frame(dst_mac, src_mac, src, dst, MrcPacket(
            Bth(opcode=Opcode.EP_RESPONSE, dest_qp=ENDPOINT_QP, psn=0x123), eeth=Eeth(op=1)))],
    }


def _admitted(frame: bytes) -> bool:
    """Whether the agent's socket filter (hosts/agent/sockfilter.py) lets ``frame`` through:
    IPv6 with next header UDP to port 4791, a routing header or IPv6; a frame too short for
    a field the filter reads is dropped (classic BPF)."""
    if len(frame) < 21 or frame[12:14] != b"\x86\xdd":
        return False
    if frame[20] in (41, 43):
        return True
    return frame[20] == 17 and len(frame) >= 58 and frame[56:58] == (4791).to_bytes(2, "big")


def _flood(kit: NetKit, workdir: Path, name: str, ifname: str, netns: str | None,
           frames: list[bytes], seconds: float) -> subprocess.Popen[bytes]:
    path = workdir / f"{name}.frames"
    write_frames(path, frames)
    cmd = [sys.executable, "-m", "testbed.flood", "--ifname", ifname, "--frames", str(path),
           "--seconds", str(seconds)]
    if netns:
        cmd += ["--netns", netns]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, cwd=REPO)


def test_malformed_frames_at_full_rate_while_real_traffic_flows(run_prefix: str,
                                                                tmp_path: Path) -> None:
    size = 64 * MiB
    with NetKit(run_prefix) as kit, StarLab(kit, tmp_path, hosts=3) as lab:
        h2 = lab.host(2)
        sw = lab.switch
        h2_gid, h3_gid = h2.spec.gids[0], lab.host(3).spec.gids[0]
        via_switch = _junk(switch_mac(sw.ports[("h3", 0)]), host_mac(3, 0), h3_gid, h2_gid)
        direct = _junk(host_mac(2, 0), switch_mac(sw.ports[("h2", 0)]), h3_gid, h2_gid)
        t = lab.connect(1, 2, size)
        for i in range(64):
            t.post(i, i * MiB, MiB, imm=1 if i == 63 else None)
        wait_until(lambda: h2.qp_stats(t.peer_qp.qpn).get("rx_data", 0) > 1000, 30,
                   "the real transfer under way")
        before = h2.host_stats()
        to_h2 = kit.name(f"s1p{sw.ports[('h2', 0)]}")
        straight = [f for fs in direct.values() for f in fs]
        kept_out = [f for f in straight if not _admitted(f)]
        assert direct["not_mrc"][0] in kept_out and len(kept_out) < len(straight)
        floods = [
            _flood(kit, tmp_path, "via-switch", lab.host(3).spec.ifnames[0],
                   lab.host(3).spec.netns, [f for fs in via_switch.values() for f in fs], 3.0),
            _flood(kit, tmp_path, "direct", to_h2, None,
                   [f for f in straight if _admitted(f)], 3.0),
            _flood(kit, tmp_path, "kept-out", to_h2, None, kept_out, 3.0)]
        sent = [json.loads(p.communicate(timeout=60)[0])["sent"] for p in floods]
        t.wait_sends(64, timeout=120)
        assert t.exact()
        w_state = lab.host(1).call("query_qp", t.qp.qpn).qp_state.name
        s_state = h2.call("query_qp", t.peer_qp.qpn).qp_state.name
        h2.agent.call(h2.agent.ports[0].read_kernel_stats)
        kernel = h2.agent.ports[0].counters.rx_sock_drops
        framer = h2.agent.framer.rx
        after = h2.host_stats()
        drops = sum(n for n, _b in sw_drop_counter(sw).values())
        alive = sw.process.alive()
    assert all(n > 1000 for n in sent), sent
    assert (w_state, s_state) == ("RTS", "RTS")
    assert framer.malformed > 0 and framer.not_for_us > 0
    assert framer.not_mrc == 0  # UDP to another port: the socket filter keeps it in the kernel
    counted = {k: after.get(k, 0) - before.get(k, 0)
               for k in ("rx_unknown_qp", "rx_ep_bad_op", "rx_ep_stale", "rx_errors")}
    assert counted["rx_unknown_qp"] > 0 and counted["rx_ep_bad_op"] > 0
    assert counted["rx_ep_stale"] > 0 and counted["rx_errors"] == 0
    # every admitted frame sent straight to h2's port was counted by the agent (or by the
    # kernel when the socket buffer was full); those sent through the switch add to that
    total = (framer.malformed + framer.not_mrc + framer.not_for_us + kernel
             + sum(counted[k] for k in ("rx_unknown_qp", "rx_ep_bad_op", "rx_ep_stale")))
    assert total >= sent[1], (total, sent, kernel)
    assert drops > 0 and alive  # the switch dropped what it could not parse, and runs on
    print(f"hostile frames: sent {sent}, agent {framer}, core {counted}, kernel drops "
          f"{kernel}, switch drops {drops}")


def sw_drop_counter(sw: SwitchHandle) -> dict[int, tuple[int, int]]:
    from common.p4runtime_client import P4RuntimeClient
    from testbed.host_lab import SWITCH_DEVICE_ID

    client = P4RuntimeClient(sw.address, SWITCH_DEVICE_ID)
    try:
        return client.read_counter("MrcIngress.drop_reason")
    finally:
        client.channel.close()


def _start_controller(kit: NetKit, log: Path, *args: str) -> None:
    proc = kit.spawn("controller", [sys.executable, "-m", "controller.server",
                                    "--topology", "clos-2p", *args], log_path=log)

    def ready() -> bool:
        if not proc.alive():
            raise RuntimeError(f"controller exited; see {log}")
        return "listening on" in log.read_text(errors="replace")

    wait_until(ready, 30, f"the controller (log {log})")


def test_wrong_token_and_foreign_uid_on_the_operator_api(run_prefix: str, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(secrets.token_hex(16))
    token.chmod(0o600)
    port = free_tcp_port()
    sock_dir = Path(tempfile.mkdtemp(prefix=f"mrcnet-{run_prefix}-"))
    sock_dir.chmod(0o755)  # anyone may reach the socket file: its own mode must refuse
    sock = sock_dir / "ctl.sock"
    try:
        with NetKit(run_prefix) as kit:
            _start_controller(kit, tmp_path / "tcp.log", "--tcp", f"127.0.0.1:{port}",
                              "--token-file", str(token))
            _start_controller(kit, tmp_path / "unix.log", "--unix", str(sock))
            with grpc.insecure_channel(f"127.0.0.1:{port}") as ch:
                stub = pb_grpc.MrcCtlStub(ch)
                good = (("authorization", f"Bearer {token.read_text()}"),)
                stub.ModifyEvFmtProfile(pb.ModifyEvFmtProfileRequest(
                    profile_id=1, state=pb.PROFILE_OFFLINE, mode=pb.EV_FMT_STEV),
                    metadata=good, timeout=5)
                before = stub.QueryEvFmtProfile(pb.QueryEvFmtProfileRequest(profile_id=1),
                                                metadata=good, timeout=5)
                service = pb.DESCRIPTOR.services_by_name["MrcCtl"]
                for method in service.methods:
                    req = method.input_type._concrete_class()
                    if method.name == "ModifyEvFmtProfile":
                        req = pb.ModifyEvFmtProfileRequest(profile_id=1, state=pb.PROFILE_INIT)
                    for md in ((("authorization", "Bearer " + "x" * 32),), (), (
                            ("authorization", token.read_text()),)):  # no "Bearer"
                        with pytest.raises(grpc.RpcError) as err:
                            out = getattr(stub, method.name)(req, metadata=md, timeout=5)
                            if method.server_streaming:
                                next(iter(out))
                        assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED, method.name
                after = stub.QueryEvFmtProfile(pb.QueryEvFmtProfileRequest(profile_id=1),
                                               metadata=good, timeout=5)
                assert after == before and after.state == pb.PROFILE_OFFLINE
            # a foreign uid cannot even connect to the unix socket
            assert (sock.stat().st_mode & 0o777) == 0o600 and sock.stat().st_uid == os.getuid()
            probe = ("import socket,sys\ns=socket.socket(socket.AF_UNIX)\n"
                     "try:\n s.connect(sys.argv[1]); print('connected')\n"
                     "except OSError as e: print(type(e).__name__, e.errno)\n")
            out = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                                  "/usr/bin/python3", "-c", probe, str(sock)],
                                 capture_output=True, text=True, timeout=30)
            assert out.stdout.split()[:2] == ["PermissionError", "13"], (out.stdout, out.stderr)
            # and root (the owner) still can, and nothing changed for it
            with grpc.insecure_channel(f"unix:{sock}") as ch:
                fmt = pb_grpc.MrcCtlStub(ch).QueryEvFmtProfile(
                    pb.QueryEvFmtProfileRequest(profile_id=1), timeout=5)
                assert fmt.state == pb.PROFILE_INIT
        assert not sock.exists()  # removed by the controller on SIGTERM
    finally:
        shutil.rmtree(sock_dir, ignore_errors=True)
