"""`make protos` is reproducible: the committed generated modules are what the pinned
grpcio-tools makes from common/proto/*.proto and from the pinned p4runtime distribution."""

from __future__ import annotations

from importlib import metadata

import google.protobuf
from google.protobuf import descriptor_pool

from common.proto import build
from common.proto.p4.v1 import p4runtime_pb2


def test_committed_generated_modules_match_a_fresh_generation() -> None:
    assert build.stale() == []


def test_the_bindings_carry_the_p4runtime_descriptors_unchanged() -> None:
    fds = build.p4runtime_descriptor_set()
    by_name = {f.name: f for f in fds.file}
    pool = descriptor_pool.Default()
    for name in build.P4_FILES:
        generated = pool.FindFileByName(f"{name}.proto").serialized_pb
        assert generated == by_name[f"{name}.proto"].SerializeToString()
    assert p4runtime_pb2.WriteRequest.DESCRIPTOR.full_name == "p4.v1.WriteRequest"


def test_runtime_is_current_protobuf() -> None:
    assert int(google.protobuf.__version__.split(".")[0]) >= 4
    assert metadata.version("p4runtime") == build.P4RUNTIME_VERSION
