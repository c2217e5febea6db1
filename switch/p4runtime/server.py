"""P4Runtime gRPC server of the embedded target.

Behaviour follows the P4Runtime 1.4 specification and, where the specification leaves room,
what simple_switch_grpc (PI) answers; docs/switch.md lists every deviation.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures

import grpc
from google.protobuf import any_pb2, struct_pb2
from google.rpc import code_pb2, status_pb2

from common.proto.p4.v1 import p4runtime_pb2, p4runtime_pb2_grpc
from switch.p4runtime.arbitration import Arbiter, ArbitrationError, Connection, from_u128
from switch.p4runtime.pipeline_config import PipelineConfigStore
from switch.p4runtime.readwrite import apply_write_batch, read_entities
from switch.pipeline import Pipeline
from switch.pipeline.state import WriteError

log = logging.getLogger(__name__)

API_VERSION = "1.4.1"
NO_PIPELINE = "No forwarding pipeline config set for this device"
PORT_STATUS_TYPE = "port_status"


def _code(code: int) -> grpc.StatusCode:
    for sc in grpc.StatusCode:
        if sc.value[0] == code:
            return sc
    return grpc.StatusCode.UNKNOWN


class P4RuntimeServicer(p4runtime_pb2_grpc.P4RuntimeServicer):
    def __init__(self, pipeline: Pipeline, device_id: int) -> None:
        self.pipeline = pipeline
        self.device_id = device_id
        self.arbiter = Arbiter(device_id)
        self.config = PipelineConfigStore(pipeline)
        self.stopping = threading.Event()

    # ---- helpers ---------------------------------------------------------------------------
    def _check_device(self, device_id: int, context: grpc.ServicerContext) -> None:
        if device_id != self.device_id:
            context.abort(
                grpc.StatusCode.NOT_FOUND,
                f"Unknown device id {device_id} (this switch is device {self.device_id})",
            )

    def _check_primary(self, request: object, context: grpc.ServicerContext) -> None:
        role = getattr(request, "role", "")
        if role:
            context.abort(
                grpc.StatusCode.UNIMPLEMENTED, "Roles are not supported (role-less target)"
            )
        has_election = request.HasField("election_id")  # type: ignore[attr-defined]
        election = from_u128(request.election_id)  # type: ignore[attr-defined]
        if self.arbiter.count() == 0:
            if has_election:
                context.abort(grpc.StatusCode.PERMISSION_DENIED, "Not primary")
            return
        if not self.arbiter.is_primary(election):
            context.abort(grpc.StatusCode.PERMISSION_DENIED, "Not primary")

    # ---- pipeline config ---------------------------------------------------------------------
    def SetForwardingPipelineConfig(
        self,
        request: p4runtime_pb2.SetForwardingPipelineConfigRequest,
        context: grpc.ServicerContext,
    ) -> p4runtime_pb2.SetForwardingPipelineConfigResponse:
        self._check_device(request.device_id, context)
        self._check_primary(request, context)
        try:
            self.config.set(request.action, request.config)
        except WriteError as err:
            context.abort(_code(err.code), err.message)
        return p4runtime_pb2.SetForwardingPipelineConfigResponse()

    def GetForwardingPipelineConfig(
        self,
        request: p4runtime_pb2.GetForwardingPipelineConfigRequest,
        context: grpc.ServicerContext,
    ) -> p4runtime_pb2.GetForwardingPipelineConfigResponse:
        self._check_device(request.device_id, context)
        config = self.config.get(request.response_type)
        if config is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, NO_PIPELINE)
        return p4runtime_pb2.GetForwardingPipelineConfigResponse(config=config)

    def Capabilities(
        self, request: p4runtime_pb2.CapabilitiesRequest, context: grpc.ServicerContext
    ) -> p4runtime_pb2.CapabilitiesResponse:
        return p4runtime_pb2.CapabilitiesResponse(p4runtime_api_version=API_VERSION)

    # ---- write / read ------------------------------------------------------------------------
    def Write(
        self, request: p4runtime_pb2.WriteRequest, context: grpc.ServicerContext
    ) -> p4runtime_pb2.WriteResponse:
        self._check_device(request.device_id, context)
        self._check_primary(request, context)
        state = self.pipeline.state
        if state is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, NO_PIPELINE)
        with self.pipeline.lock:
            results = apply_write_batch(self.pipeline, request.updates, request.atomicity)
        if all(r.code == code_pb2.OK for r in results):
            return p4runtime_pb2.WriteResponse()
        status = status_pb2.Status(code=code_pb2.UNKNOWN, message="Write failure.")
        for r in results:
            err = p4runtime_pb2.Error(canonical_code=r.code, message=r.message)
            if r.code != code_pb2.OK:
                err.space = "ALL-sswitch-p4org"
            status.details.add().Pack(err)
        context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        context.set_code(grpc.StatusCode.UNKNOWN)
        context.set_details(status.message)
        return p4runtime_pb2.WriteResponse()

    def Read(
        self, request: p4runtime_pb2.ReadRequest, context: grpc.ServicerContext
    ) -> Iterator[p4runtime_pb2.ReadResponse]:
        self._check_device(request.device_id, context)
        if self.pipeline.state is None:
            context.abort(grpc.StatusCode.FAILED_PRECONDITION, NO_PIPELINE)
        try:
            responses = read_entities(self.pipeline, request.entities)
        except WriteError as err:
            context.abort(_code(err.code), err.message)
        except Exception as exc:  # never let a bad request take the server down
            log.exception("unexpected error in Read")
            context.abort(grpc.StatusCode.INTERNAL, f"internal error: {exc}")
        yield from responses

    # ---- stream ------------------------------------------------------------------------------
    def StreamChannel(
        self,
        request_iterator: Iterator[p4runtime_pb2.StreamMessageRequest],
        context: grpc.ServicerContext,
    ) -> Iterator[p4runtime_pb2.StreamMessageResponse]:
        holder: dict[str, Connection] = {}
        outbox_conn = Connection(election_id=-1)  # outbox until arbitration
        failure: list[tuple[int, str]] = []

        def reader() -> None:
            try:
                for req in request_iterator:
                    kind = req.WhichOneof("update")
                    if kind == "arbitration":
                        self._arbitration(req.arbitration, holder, outbox_conn)
                    elif kind == "packet":
                        err = p4runtime_pb2.StreamMessageResponse()
                        err.error.canonical_code = code_pb2.UNIMPLEMENTED
                        err.error.message = "This target has no CPU port: PacketOut dropped"
                        err.error.packet_out.packet_out.CopyFrom(req.packet)
                        outbox_conn.outbox.put(err)
            except ArbitrationError as exc:
                failure.append((exc.code, exc.message))
            except grpc.RpcError:
                pass
            except Exception:  # a bad stream must never take the server down
                log.exception("StreamChannel reader failed")
                failure.append((code_pb2.INTERNAL, "internal error in StreamChannel"))
            finally:
                conn = holder.get("conn")
                if conn is not None:
                    self.arbiter.remove(conn)
                outbox_conn.outbox.put(None)

        thread = threading.Thread(target=reader, name="p4rt-stream", daemon=True)
        thread.start()
        while True:
            msg = outbox_conn.outbox.get()
            if msg is None:
                break
            yield msg
        if failure:
            code, message = failure[0]
            context.abort(_code(code), message)

    def _arbitration(
        self,
        arb: p4runtime_pb2.MasterArbitrationUpdate,
        holder: dict[str, Connection],
        conn: Connection,
    ) -> None:
        if arb.HasField("role") and (arb.role.name or arb.role.id):
            raise ArbitrationError(
                code_pb2.UNIMPLEMENTED, "Roles are not supported (role-less target)"
            )
        election_id = from_u128(arb.election_id)
        if "conn" not in holder:
            if arb.device_id != self.device_id:
                raise ArbitrationError(
                    code_pb2.NOT_FOUND,
                    f"Unknown device id {arb.device_id} (this switch is device {self.device_id})",
                )
            conn.election_id = election_id
            self.arbiter.add(conn)
            holder["conn"] = conn
        else:
            if arb.device_id != self.device_id:
                raise ArbitrationError(code_pb2.FAILED_PRECONDITION, "Invalid device id")
            self.arbiter.update(conn, election_id)

    # ---- notifications -----------------------------------------------------------------------
    def port_status_message(self, port: int, up: bool) -> p4runtime_pb2.StreamMessageResponse:
        body = struct_pb2.Struct()
        body.update(
            {
                "type": PORT_STATUS_TYPE,
                "device_id": self.device_id,
                "port": port,
                "oper_status": "UP" if up else "DOWN",
            }
        )
        other = any_pb2.Any()
        other.Pack(body)
        return p4runtime_pb2.StreamMessageResponse(other=other)


class P4RuntimeServer:
    """A running P4Runtime gRPC server bound to one Pipeline."""

    def __init__(self, pipeline: Pipeline, address: str, device_id: int) -> None:
        self.pipeline = pipeline
        self.address = address
        self.device_id = device_id
        self.port = 0
        self.servicer = P4RuntimeServicer(pipeline, device_id)
        self._server: grpc.Server | None = None
        self._lock = threading.Lock()

    def load_pipeline(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        """Commit ``config`` (P4Info + BMv2 JSON) as if a controller had pushed it with
        VERIFY_AND_COMMIT (``switch.main --json``); WriteError when it is refused."""
        self.servicer.config.set(
            p4runtime_pb2.SetForwardingPipelineConfigRequest.VERIFY_AND_COMMIT, config
        )

    def notify_port_status(self, port: int, up: bool) -> None:
        """Tell the primary controller (on its stream) that ``port`` went up or down.

        Sent as StreamMessageResponse.other = Any(google.protobuf.Struct {type:
        "port_status", device_id, port, oper_status: "UP"|"DOWN"}); no primary, no message.
        """
        self.servicer.arbiter.send_to_primary(self.servicer.port_status_message(port, up))

    def stop(self) -> None:
        """Stop serving; idempotent."""
        with self._lock:
            server, self._server = self._server, None
        if server is not None:
            self.servicer.arbiter.close_all()
            server.stop(grace=None).wait(5)


def start_server(
    pipeline: Pipeline,
    address: str,
    device_id: int,
    extra_servicers: Sequence[Callable[[grpc.Server], None]] = (),
) -> P4RuntimeServer:
    """Start the P4Runtime server on ``address`` ("host:port"; port 0 picks a free one).

    ``extra_servicers`` are called with the grpc.Server before it starts (e.g. the switch
    admin service). Raises OSError when the address cannot be bound.
    """
    server = P4RuntimeServer(pipeline, address, device_id)
    grpc_server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=40, thread_name_prefix="p4rt"),
        options=[("grpc.max_receive_message_length", 64 * 1024 * 1024)],
    )
    p4runtime_pb2_grpc.add_P4RuntimeServicer_to_server(server.servicer, grpc_server)
    for add in extra_servicers:
        add(grpc_server)
    try:
        server.port = grpc_server.add_insecure_port(address)
    except RuntimeError as exc:
        raise OSError(f"P4Runtime server: cannot bind {address}: {exc}") from exc
    if server.port == 0:
        raise OSError(f"P4Runtime server: cannot bind {address}")
    grpc_server.start()
    server._server = grpc_server
    return server
