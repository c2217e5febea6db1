"""Set/GetForwardingPipelineConfig: P4Info + BMv2 JSON, as simple_switch_grpc takes them.

``p4_device_config`` is the BMv2 JSON p4c produced with the P4Info; the target compiles it
(p4json engine) and checks that the P4Info describes it. An empty device config selects a
program built into this target (mrc_switch, ocs; their JSON under switch/programs) whose
content the pushed P4Info must equal (common.p4schema.canonical.program_content: object order
and documentation-only fields do not matter, so any P4Info p4c writes for the program is
accepted). A JSON feature the target does not execute, or a P4Info that does not match, is
INVALID_ARGUMENT naming it.
"""

from __future__ import annotations

import hashlib

from google.rpc import code_pb2

from common.p4schema import PROGRAMS
from common.p4schema.canonical import content_bytes, program_content
from common.p4schema.model import Program
from common.proto.p4.config.v1 import p4info_pb2
from common.proto.p4.v1 import p4runtime_pb2
from switch.p4json import program as pm
from switch.p4json.errors import ConfigError
from switch.pipeline import Pipeline
from switch.pipeline.binding import Mismatch, program_from_p4info
from switch.pipeline.pipeline import Prepared
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
        self.saved: tuple[Prepared, p4runtime_pb2.ForwardingPipelineConfig] | None = None

    def builtin_program(self, p4info: p4info_pb2.P4Info) -> Program | None:
        name = self.builtin_bytes.get(content_bytes(p4info))
        return None if name is None else PROGRAMS[name]

    def match(self, p4info: p4info_pb2.P4Info) -> Program:
        """The built-in program whose P4Info content equals ``p4info``'s."""
        program = self.builtin_program(p4info)
        if program is not None:
            return program
        got = program_content(p4info)
        closest = max(
            self.builtin,
            key=lambda n: len(set(_names(got, "tables")) & set(_names(self.builtin[n], "tables"))),
        )
        detail = describe_mismatch(got, closest, self.builtin[closest])
        raise WriteError(
            code_pb2.INVALID_ARGUMENT,
            "P4Info does not match any program built into this target "
            f"({', '.join(sorted(self.builtin))}; p4/<program>.p4info.txtpb): {detail} "
            "(push the program's BMv2 JSON as p4_device_config to run another one)",
        )

    def resolve(self, config: p4runtime_pb2.ForwardingPipelineConfig) -> Prepared:
        """The program a config describes, compiled and checked (WriteError otherwise)."""
        device = bytes(config.p4_device_config)
        if not device:
            return self.pipeline.prepare(self.match(config.p4info))
        program = self.builtin_program(config.p4info)
        if program is None:
            try:
                source = pm.load_program(device)
            except ConfigError as exc:
                raise WriteError(code_pb2.INVALID_ARGUMENT,
                                 f"Device config refused: {exc}") from None
            name = "p4info-" + hashlib.sha1(config.p4info.SerializeToString()).hexdigest()[:8]
            try:
                program = program_from_p4info(config.p4info, name, source)
            except Mismatch as exc:
                raise WriteError(code_pb2.INVALID_ARGUMENT, str(exc)) from None
        return self.pipeline.prepare(program, device)

    def set(self, action: int, config: p4runtime_pb2.ForwardingPipelineConfig) -> None:
        if action == Req.UNSPECIFIED or action not in Req.Action.values():
            raise WriteError(code_pb2.INVALID_ARGUMENT, "Invalid SetForwardingPipeline action")
        if action == Req.COMMIT:
            if self.saved is None:
                raise WriteError(
                    code_pb2.FAILED_PRECONDITION, "No saved forwarding pipeline config to commit"
                )
            prepared, saved = self.saved
            self._commit(prepared, saved, reconcile=False)
            self.saved = None
            return
        prepared = self.resolve(config)
        stored = p4runtime_pb2.ForwardingPipelineConfig()
        stored.CopyFrom(config)
        if action == Req.VERIFY:
            return
        if action == Req.VERIFY_AND_SAVE:
            self.saved = (prepared, stored)
            return
        self._commit(prepared, stored, reconcile=action == Req.RECONCILE_AND_COMMIT)

    def _commit(
        self, prepared: Prepared, config: p4runtime_pb2.ForwardingPipelineConfig, reconcile: bool
    ) -> None:
        pipe = self.pipeline
        with pipe.lock:
            same = (pipe.program is not None and pipe.program == prepared.program
                    and pipe.source == prepared.source)
            keep = pipe.state if reconcile and same else None
            pipe.commit(prepared.program, keep, prepared)
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
