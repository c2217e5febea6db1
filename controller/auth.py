"""Who may talk to the controller: a private unix socket, or TCP with a token or mTLS.

- Unix socket (default): created with mode 0600 (umask set around the bind, then chmod), so
  only the owner (root, the orchestrator) can connect. A stale socket file left by a dead
  controller is replaced; a live one is an error.
- TCP: refused unless a bearer token (``authorization: Bearer <token>`` metadata, compared in
  constant time) or mutual TLS is configured. The token file must not be readable by group or
  others. Calls without the right token fail with UNAUTHENTICATED before any handler runs.
"""

from __future__ import annotations

import errno
import hmac
import os
import socket
import stat
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc

TOKEN_HEADER = "authorization"
_UMASK_LOCK = threading.Lock()


class AuthError(RuntimeError):
    """Insecure or unusable security configuration (the server refuses to start)."""


def read_token(path: str | Path) -> str:
    p = Path(path)
    try:
        st = p.stat()
        text = p.read_text().strip()
    except OSError as exc:
        raise AuthError(f"token file {p}: {exc.strerror or exc}") from None
    if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise AuthError(f"token file {p} is accessible by group/others (chmod 600 {p})")
    if len(text) < 16 or any(c.isspace() for c in text):
        raise AuthError(f"token file {p}: the token must be at least 16 characters, no spaces")
    return text


class TokenInterceptor(grpc.ServerInterceptor):  # type: ignore[misc]
    """Rejects every call whose metadata lacks ``authorization: Bearer <token>``."""

    def __init__(self, token: str) -> None:
        self._expected = f"Bearer {token}".encode()
        self.rejected = 0

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(details)
        value = next((v for k, v in details.invocation_metadata or () if k == TOKEN_HEADER), None)
        given = value.encode() if isinstance(value, str) else (value or b"")
        if hmac.compare_digest(given, self._expected) or handler is None:
            return handler
        self.rejected += 1
        return _deny(handler, "missing token" if value is None else "wrong token")


def _deny(handler: grpc.RpcMethodHandler, why: str) -> grpc.RpcMethodHandler:
    def abort(_request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(
            grpc.StatusCode.UNAUTHENTICATED, f"{why}: send 'authorization: Bearer <token>'"
        )

    if handler.request_streaming and handler.response_streaming:
        return grpc.stream_stream_rpc_method_handler(abort)
    if handler.request_streaming:
        return grpc.stream_unary_rpc_method_handler(abort)
    if handler.response_streaming:
        return grpc.unary_stream_rpc_method_handler(abort)
    return grpc.unary_unary_rpc_method_handler(abort)


def prepare_unix_path(path: str | Path) -> Path:
    """Check the socket path; remove a stale socket; refuse a live one or a non-socket file."""
    p = Path(path)
    if not p.parent.is_dir():
        raise AuthError(f"directory {p.parent} does not exist")
    if p.exists() or p.is_symlink():
        if not stat.S_ISSOCK(p.lstat().st_mode):
            raise AuthError(f"{p} exists and is not a socket; refusing to replace it")
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.connect(str(p))
        except OSError as exc:
            if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
                raise AuthError(f"{p}: {exc.strerror}") from None
            p.unlink()
        else:
            raise AuthError(f"{p} is in use by a running server")
        finally:
            probe.close()
    return p


def bind_unix(server: grpc.Server, path: str | Path) -> Path:
    """Bind ``server`` to a unix socket readable and writable by its owner only."""
    p = prepare_unix_path(path)
    with _UMASK_LOCK:
        old = os.umask(0o177)
        try:
            if not server.add_insecure_port(f"unix:{p}"):
                raise AuthError(f"cannot bind unix socket {p}")
        finally:
            os.umask(old)
    if p.exists():
        os.chmod(p, 0o600)
    return p


def tls_credentials(cert: str, key: str, ca: str) -> grpc.ServerCredentials:
    """Mutual TLS: the server presents cert/key and requires client certificates signed by ca."""
    try:
        pair = (Path(key).read_bytes(), Path(cert).read_bytes())
        root = Path(ca).read_bytes()
    except OSError as exc:
        raise AuthError(f"TLS file: {exc.strerror} ({exc.filename})") from None
    return grpc.ssl_server_credentials([pair], root_certificates=root, require_client_auth=True)


# ---------------------------------------------------------------------------- client side


class _ClientToken(
    grpc.UnaryUnaryClientInterceptor,  # type: ignore[misc]
    grpc.UnaryStreamClientInterceptor,  # type: ignore[misc]
    grpc.StreamUnaryClientInterceptor,  # type: ignore[misc]
    grpc.StreamStreamClientInterceptor,  # type: ignore[misc]
):
    def __init__(self, token: str) -> None:
        self._md = (TOKEN_HEADER, f"Bearer {token}")

    def _details(self, details: Any) -> Any:
        md = [*(details.metadata or ()), self._md]
        return (
            details._replace(metadata=md) if hasattr(details, "_replace") else _Details(details, md)
        )

    def intercept_unary_unary(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_unary_stream(self, continuation: Any, details: Any, request: Any) -> Any:
        return continuation(self._details(details), request)

    def intercept_stream_unary(self, continuation: Any, details: Any, it: Any) -> Any:
        return continuation(self._details(details), it)

    def intercept_stream_stream(self, continuation: Any, details: Any, it: Any) -> Any:
        return continuation(self._details(details), it)


class _Details(grpc.ClientCallDetails):  # type: ignore[misc]
    def __init__(self, base: Any, metadata: list[tuple[str, str]]) -> None:
        self.method = base.method
        self.timeout = base.timeout
        self.metadata = metadata
        self.credentials = base.credentials
        self.wait_for_ready = getattr(base, "wait_for_ready", None)
        self.compression = getattr(base, "compression", None)


def open_channel(
    address: str,
    token: str | None = None,
    tls: tuple[str, str, str] | None = None,
) -> grpc.Channel:
    """Channel to the controller: 'unix:/path' or 'host:port' (token and/or (cert, key, ca))."""
    if tls is not None:
        cert, key, ca = (Path(x).read_bytes() for x in tls)
        creds = grpc.ssl_channel_credentials(
            root_certificates=ca, private_key=key, certificate_chain=cert
        )
        channel = grpc.secure_channel(address, creds)
    else:
        channel = grpc.insecure_channel(address)
    if token:
        channel = grpc.intercept_channel(channel, _ClientToken(token))
    return channel
