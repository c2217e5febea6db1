"""Operator API privileges: private unix socket, token (or mTLS) on TCP, refusal otherwise."""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest

from common.proto import mrc_ctl_pb2 as pb
from common.proto import mrc_ctl_pb2_grpc as pb_grpc
from controller.auth import AuthError, open_channel, read_token
from controller.server import ControllerServer, ServerConfig, start


def token_file(tmp_path: Path, mode: int = 0o600) -> tuple[Path, str]:
    token = secrets.token_hex(16)
    path = tmp_path / "token"
    path.write_text(token + "\n")
    path.chmod(mode)
    return path, token


@pytest.fixture
def tcp_server(tmp_path: Path) -> Iterator[tuple[ControllerServer, str]]:
    path, token = token_file(tmp_path)
    srv = start(
        ServerConfig(tcp="127.0.0.1:0", token_file=str(path), topology="clos-1p", max_workers=8)
    )
    yield srv, token
    srv.stop()


def status(fn: object) -> grpc.StatusCode:
    with pytest.raises(grpc.RpcError) as info:
        fn()  # type: ignore[operator]
    return info.value.code()  # type: ignore[attr-defined,no-any-return]


def test_tcp_requires_the_token(tcp_server: tuple[ControllerServer, str]) -> None:
    srv, token = tcp_server
    assert srv.address.startswith("127.0.0.1:") and not srv.address.endswith(":0")
    with grpc.insecure_channel(srv.address) as bare:
        ctl = pb_grpc.MrcCtlStub(bare)
        assert (
            status(lambda: ctl.QueryVersion(pb.QueryVersionRequest()))
            == grpc.StatusCode.UNAUTHENTICATED
        )
        # streaming calls and the agent service are protected too
        watch = ctl.WatchEvEvents(pb.WatchEvEventsRequest())
        assert status(lambda: next(watch)) == grpc.StatusCode.UNAUTHENTICATED
        agent = pb_grpc.MrcAgentStub(bare)
        reg = pb.RegisterAgentRequest(host="h0", ports=[pb.AgentPort(port=1, gid="fd00::1")])
        assert status(lambda: agent.RegisterAgent(reg)) == grpc.StatusCode.UNAUTHENTICATED
        # a modifying call without the token changes nothing
        req = pb.ModifyCcProfileRequest(
            profile_id=1, state=pb.PROFILE_OFFLINE, algorithm="uet-1.0-nscc"
        )
        assert status(lambda: ctl.ModifyCcProfile(req)) == grpc.StatusCode.UNAUTHENTICATED
    with open_channel(srv.address, token="x" * 32) as wrong:
        ctl = pb_grpc.MrcCtlStub(wrong)
        assert (
            status(lambda: ctl.QueryVersion(pb.QueryVersionRequest()))
            == grpc.StatusCode.UNAUTHENTICATED
        )
    with open_channel(srv.address, token=token) as good:
        ctl = pb_grpc.MrcCtlStub(good)
        assert ctl.QueryVersion(pb.QueryVersionRequest()).current_version
        assert ctl.QueryCcProfile(pb.QueryCcProfileRequest(profile_id=1)).state == pb.PROFILE_INIT
        fabric = pb_grpc.MrcFabricStub(good)
        assert fabric.GetTopology(pb.GetTopologyRequest()).name == "clos-1p"


def test_tcp_without_token_or_tls_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AuthError, match="--tcp needs --token-file"):
        start(ServerConfig(tcp="127.0.0.1:0"))
    loose, _ = token_file(tmp_path, mode=0o644)
    with pytest.raises(AuthError, match="accessible by group/others"):
        start(ServerConfig(tcp="127.0.0.1:0", token_file=str(loose)))
    short = tmp_path / "short"
    short.write_text("abc")
    short.chmod(0o600)
    with pytest.raises(AuthError, match="at least 16"):
        read_token(short)
    with pytest.raises(AuthError, match="exactly one"):
        start(ServerConfig())


def test_stale_socket_replaced_live_socket_refused(tmp_path: Path) -> None:
    path = tmp_path / "ctl.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # file stays, nobody listens
    srv = start(ServerConfig(unix=str(path)))
    try:
        assert oct(os.stat(path).st_mode & 0o777) == oct(0o600)
        with pytest.raises(AuthError, match="in use by a running server"):
            start(ServerConfig(unix=str(path)))
    finally:
        srv.stop()
    assert not path.exists()  # removed on stop
    plain = tmp_path / "plain"
    plain.write_text("not a socket")
    with pytest.raises(AuthError, match="not a socket"):
        start(ServerConfig(unix=str(plain)))


@pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl not installed")
def test_mutual_tls(tmp_path: Path) -> None:
    def run(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True, cwd=tmp_path)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=test-ca",
    )
    for name, cn in (("server", "localhost"), ("client", "operator")):
        run(
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            f"{name}.key",
            "-out",
            f"{name}.csr",
            "-subj",
            f"/CN={cn}",
        )
        ext = tmp_path / f"{name}.ext"
        ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
        run("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
            "-out", f"{name}.pem", "-days", "1", "-extfile", str(ext))  # fmt: skip
    t = lambda n: str(tmp_path / n)  # noqa: E731
    srv = start(
        ServerConfig(tcp="127.0.0.1:0", tls=(t("server.pem"), t("server.key"), t("ca.pem")))
    )
    try:
        with open_channel(srv.address, tls=(t("client.pem"), t("client.key"), t("ca.pem"))) as ch:
            assert (
                pb_grpc.MrcCtlStub(ch)
                .QueryVersion(pb.QueryVersionRequest(), timeout=30)
                .current_version
            )
        # without a client certificate the handshake fails
        creds = grpc.ssl_channel_credentials(root_certificates=(tmp_path / "ca.pem").read_bytes())
        with grpc.secure_channel(srv.address, creds) as anon:
            code = status(
                lambda: pb_grpc.MrcCtlStub(anon).QueryVersion(pb.QueryVersionRequest(), timeout=30)
            )
            assert code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.UNAUTHENTICATED)
    finally:
        srv.stop()
