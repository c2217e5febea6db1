"""The p4c outputs committed under p4/ (written by ``make p4``, common/p4build.py).

``p4/<program>.p4info.txtpb`` is the P4Info p4c wrote for ``p4/<program>.p4``: the one the
controller pushes and the embedded target accepts. ``p4/<program>.json`` is the BMv2 device
config p4c wrote.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

from google.protobuf import text_format

from common.proto.p4.config.v1 import p4info_pb2

P4_DIR = Path(__file__).resolve().parents[2] / "p4"


def p4info_path(name: str, p4_dir: Path = P4_DIR) -> Path:
    return p4_dir / f"{name}.p4info.txtpb"


def json_path(name: str, p4_dir: Path = P4_DIR) -> Path:
    return p4_dir / f"{name}.json"


def read_p4info(path: Path) -> p4info_pb2.P4Info:
    """Parse a text-format P4Info file."""
    return text_format.Parse(path.read_text(), p4info_pb2.P4Info())


@cache
def _committed(name: str) -> bytes:
    return read_p4info(p4info_path(name)).SerializeToString()


def load_p4info(name: str) -> p4info_pb2.P4Info:
    """A fresh copy of the committed P4Info of program ``name`` (parsed once)."""
    return p4info_pb2.P4Info.FromString(_committed(name))


@cache
def load_device_config(name: str) -> bytes:
    """The committed BMv2 JSON of program ``name``, as pushed in ``p4_device_config``."""
    return json_path(name).read_bytes()
