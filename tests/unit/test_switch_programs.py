"""The embedded target's built-in programs: their BMv2 JSON is current (where p4c exists),
loads in the engine and is described by the committed P4Info."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from common.p4schema import PROGRAMS
from switch.p4json.engine import Engine
from switch.pipeline.binding import bind
from switch.programs import BUILTIN, builtin_json
from switch.stf.toolchain import P4C, find_tool

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(BUILTIN))
def test_builtin_program_loads_and_matches_its_p4info(name: str) -> None:
    engine = Engine(builtin_json(name))
    binding = bind(PROGRAMS[name], engine)
    assert set(binding.tables) == {PROGRAMS[name].id(t.name) for t in PROGRAMS[name].tables}


def test_mrc_switch_runs_its_embedded_build() -> None:
    """The byte depth is target intrinsic metadata: the embedded build never derives it from
    the packet depth (the BMv2 build multiplies enq_qdepth by 4096)."""
    text = builtin_json("mrc_switch").decode()
    assert "BMV2_QDEPTH_CELL_BYTES" not in text and "0x00001000" not in text
    assert "metadata_t.enq_qdepth_bytes" in text
    assert json.loads(text)["__meta__"]["version"][0] == 2


@pytest.mark.skipif(find_tool(P4C) is None, reason=f"needs p4c ({P4C})")
def test_committed_builds_are_what_p4c_produces() -> None:
    done = subprocess.run([sys.executable, "-m", "switch.programs", "--check"], cwd=ROOT,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
