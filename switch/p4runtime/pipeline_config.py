"""Set/GetForwardingPipelineConfig: the P4Info must describe one of the built-in programs.

The embedded target executes only the programs of common.p4schema, so a pushed P4Info is
accepted when its content equals one of theirs (common.p4schema.canonical.program_content:
object order and documentation-only fields do not matter, so any P4Info p4c writes for the
program is accepted); the device config bytes are opaque here (stored and returned, never
interpreted).
"""

from __future__ import annotations

from google.rpc import code_pb2

from common.p4schema import PROGRAMS
from common.p4schema.canonical import content_bytes, program_content
from common.p4schema.model import Program
from common.proto.p4.config.v1 import p4info_pb2
from common.proto.p4.v1 import p4runtime_pb2
from switch.pipeline import Pipeline
from switch.pipeline.state import WriteError

Req = p4runtime_pb2.SetForwardingPipelineConfigRequest
Get = p4runtime_pb2.GetForwardingPipelineConfigRequest
KINDS = ("tables", "actions", "action_profiles", "counters", "registers")


def _names(info: p4info_pb2.P4Info, kind: str) -> dict[str, object]:
    return {o.preamble.name: o for o in getattr(info, kind)}


def describe_mismatch(got: p4info_pb2.P4Info, name: str, want: p4info_pb2.P4Info) -> str:
    """First difference between a pushed P4Info and a built-in one, for the error message."""
    for kind in KINDS:
        g, w = _names(got, kind), _names(want, kind)
        extra = sorted(set(g) - set(w))
        if extra:
            return f"{kind[:-1]} '{extra[0]}' is not in {name}"
        missing = sorted(set(w) - set(g))
        if missing:
            return f"{kind[:-1]} '{missing[0]}' of {name} is missing"
        for obj_name, obj in w.items():
            if g[obj_name] != obj:
                return f"{kind[:-1]} '{obj_name}' differs from {name} (ids, fields or widths)"
    if got.pkg_info != want.pkg_info:
        return f"pkg_info differs from {name}"
    return f"other P4Info fields differ from {name}"


class PipelineConfigStore:
    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.builtin = {name: program_content(p.to_p4info()) for name, p in PROGRAMS.items()}
        self.builtin_bytes = {content_bytes(info): name for name, info in self.builtin.items()}
        self.committed: p4runtime_pb2.ForwardingPipelineConfig | None = None
        self.saved: tuple[Program, p4runtime_pb2.ForwardingPipelineConfig] | None = None

    def match(self, p4info: p4info_pb2.P4Info) -> Program:
        name = self.builtin_bytes.get(content_bytes(p4info))
        if name is not None:
            return PROGRAMS[name]
        got = program_content(p4info)
        closest = max(
            self.builtin,
            key=lambda n: len(set(_names(got, "tables")) & set(_names(self.builtin[n], "tables"))),
        )
        detail = describe_mismatch(got, closest, self.builtin[closest])
        raise WriteError(
            code_pb2.INVALID_ARGUMENT,
            "P4Info does not match any program built into this target "
            f"({', '.join(sorted(self.builtin))}; p4/<program>.p4info.txtpb): {detail}",
        )

    def set(self, action: int, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        if action == Req.UNSPECIFIED or action not in Req.Action.values():
            raise WriteError(code_pb2.INVALID_ARGUMENT, "Invalid SetForwardingPipeline action")
        if action == Req.COMMIT:
            if self.saved is None:
                raise WriteError(
                    code_pb2.FAILED_PRECONDITION, "No saved forwarding pipeline config to commit"
                )
            program, saved = self.saved
            self._commit(program, saved, reconcile=False)
            self.saved = None
            return
        program = self.match(config.p4info)
        stored = p4runtime_pb2.ForwardingPipelineConfig()
        stored.CopyFrom(config)
        if action == Req.VERIFY:
            return
        if action == Req.VERIFY_AND_SAVE:
            self.saved = (program, stored)
            return
        self._commit(program, stored, reconcile=action == Req.RECONCILE_AND_COMMIT)

    def _commit(
        self, program: Program, config: p4runtime_pb2.ForwardingPipelineConfig, reconcile: bool
    ) -> None:
        pipe = self.pipeline
        with pipe.lock:
            keep = pipe.state if reconcile and pipe.program is program else None
            pipe.commit(program, keep)
            self.committed = config

    def get(self, response_type: int) -> p4runtime_pb2.ForwardingPipelineConfig | None:
        if self.committed is None:
            return None
        out = p4runtime_pb2.ForwardingPipelineConfig()
        if self.committed.HasField("cookie"):
            out.cookie.CopyFrom(self.committed.cookie)
        if response_type in (Get.ALL, Get.P4INFO_AND_COOKIE):
            out.p4info.CopyFrom(self.committed.p4info)
        if response_type in (Get.ALL, Get.DEVICE_CONFIG_AND_COOKIE):
            out.p4_device_config = self.committed.p4_device_config
        return out
