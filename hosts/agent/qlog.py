"""qlog files in the main schema's JSON-SEQ form: one file per QP plus one for the agent.

Format (draft-ietf-quic-qlog-main-schema, ``QlogFileSeq``; RFC 7464 JSON text sequences:
every record is an ASCII RS (0x1E), one JSON object and a line feed), as qvis and other qlog
tools read ``.sqlog`` files:

- record 1, the header: ``{"qlog_format": "JSON-SEQ", "qlog_version": "0.4", "title": ...,
  "trace": {"title": ..., "vantage_point": {"name": H, "type": "unknown"},
  "common_fields": {"group_id": "H-qpN", "protocol_type": ["MRC"], "reference_time":
  EPOCH_MS, "time_format": "relative", "time_dilation": TDF}}}``;
- then events: ``{"time": MS_SINCE_REFERENCE, "name": "mrc:EVENT", "data": {...}}``.

Times are the run's clock (common/vclock.py): under time dilation (``time_dilation`` > 1)
they are virtual milliseconds, and ``reference_time`` is the run clock's Unix time of the
agent's start.

Every event name is in the ``mrc:`` namespace (hosts/transport/lognames.py defines them
once): the agent's own, written as they are named (``mrc:ev_state_changed``,
``mrc:completion_error``, ``mrc:async_event``, ``mrc:port_status``, ``mrc:qp_metrics``,
``mrc:metrics_sampled``: periodic counters, never per data packet, ...) and the transport
core's records, whose ``category:event`` names become ``mrc:category_event`` (``qp:state``
-> ``mrc:qp_state``, ``recovery:ack_timeout`` -> ``mrc:recovery_ack_timeout``;
docs/transport.md). Writes are
buffered and flushed on each metrics sample and on close, so logging stays off the
per-packet path.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import IO, Any

from hosts.transport.lognames import METRICS_SAMPLED, QP_METRICS

QLOG_VERSION = "0.4"
QLOG_FORMAT = "JSON-SEQ"
SUFFIX = ".sqlog"
RS = "\x1e"
NAMESPACE = "mrc"


def event_name(name: str) -> str:
    """The ``mrc:`` name of an event (``recovery:ack_timeout`` -> ``mrc:recovery_ack_timeout``)."""
    if name.startswith(f"{NAMESPACE}:"):
        return name
    return f"{NAMESPACE}:{name.replace(':', '_')}"


class QlogWriter:
    """Writes per-QP qlog files under ``directory`` as ``HOST-qpN.sqlog``."""

    def __init__(self, directory: str | Path, host: str, t0: float,
                 reference_unix: float | None = None, tdf: float = 1.0) -> None:
        """``t0``: the agent's clock at ``reference_unix`` (Unix seconds; default now)."""
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.t0 = t0  # the agent's clock at reference_time
        self.reference_ms = (time.time() if reference_unix is None else reference_unix) * 1000.0
        self.tdf = tdf
        self._files: dict[int | None, IO[str]] = {}
        self._closed: set[int] = set()  # QPs whose file was closed (a late event appends)
        self.records = 0

    def path_for(self, qpn: int | None) -> Path:
        suffix = "agent" if qpn is None else f"qp{qpn}"
        return self.directory / f"{self.host}-{suffix}{SUFFIX}"

    def _file(self, qpn: int | None) -> IO[str]:
        f = self._files.get(qpn)
        if f is None and qpn is not None and qpn in self._closed:
            f = open(self.path_for(qpn), "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
            self._files[qpn] = f
            return f
        if f is None:
            f = open(self.path_for(qpn), "w", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
            who = f"{self.host}-agent" if qpn is None else f"{self.host}-qp{qpn}"
            header = {
                "qlog_format": QLOG_FORMAT,
                "qlog_version": QLOG_VERSION,
                "title": f"mrcnet agent {self.host}",
                "trace": {
                    "title": who,
                    "vantage_point": {"name": self.host, "type": "unknown"},
                    "common_fields": {
                        "group_id": who,
                        "protocol_type": ["MRC"],
                        "reference_time": self.reference_ms,
                        "time_format": "relative",
                        "host": self.host,
                        "qpn": qpn,
                        "time_dilation": self.tdf,
                    },
                },
            }
            f.write(RS + json.dumps(header) + "\n")
            self._files[qpn] = f
        return f

    def event(self, qpn: int | None, name: str, data: dict[str, Any], now: float) -> None:
        """Append one event; ``now`` is the agent's clock (the run's, possibly dilated)."""
        line = json.dumps(
            {"time": round((now - self.t0) * 1000.0, 3), "name": event_name(name), "data": data},
            default=_jsonable,
        )
        self._file(qpn).write(RS + line + "\n")
        self.records += 1

    def flush(self) -> None:
        for f in self._files.values():
            f.flush()

    def close_qp(self, qpn: int) -> None:
        """Close the file of a QP that is gone (an event for it later appends to it)."""
        f = self._files.pop(qpn, None)
        if f is not None:
            f.close()
            self._closed.add(qpn)

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files.clear()


def _jsonable(value: object) -> object:
    """Enums, bytes and dataclass-like values in records become plain JSON."""
    name = getattr(value, "name", None)
    if isinstance(name, str):
        return name
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if hasattr(value, "__dict__"):
        return {k: v for k, v in vars(value).items() if not k.startswith("_")}
    slots = getattr(value, "__slots__", None)
    if slots:
        return {k: getattr(value, k) for k in slots if hasattr(value, k)}
    return str(value)


def read_qlog(path: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Return (header, events) of a JSON-SEQ qlog file; a malformed record raises ValueError
    (a truncated last record, as a crashed writer leaves, is ignored)."""
    text = Path(path).read_text(encoding="utf-8")
    if not text.startswith(RS):
        raise ValueError(f"{path}: not a JSON-SEQ qlog file (no record separator)")
    records = text.split(RS)[1:]
    header = json.loads(records[0])
    if header.get("qlog_format") != QLOG_FORMAT or header.get("qlog_version") != QLOG_VERSION:
        raise ValueError(f"{path}: not a {QLOG_FORMAT} qlog file of version {QLOG_VERSION}")
    events = []
    for i, rec in enumerate(records[1:], start=1):
        if not rec.endswith("\n") and i == len(records) - 1:
            break  # cut short mid-write
        events.append(json.loads(rec))
    return header, events


def summarize(path: str | Path) -> dict[str, Any]:
    """Per-file summary: event counts by name, time span (ms) and the last metrics record."""
    header, events = read_qlog(path)
    counts: dict[str, int] = {}
    last_metrics: dict[str, Any] | None = None
    for e in events:
        counts[e["name"]] = counts.get(e["name"], 0) + 1
        if e["name"] in (QP_METRICS, METRICS_SAMPLED):
            last_metrics = e["data"]
    common = header.get("trace", {}).get("common_fields", {})
    return {
        "file": str(path),
        "host": common.get("host"),
        "qpn": common.get("qpn"),
        "span_ms": (events[-1]["time"] - events[0]["time"]) if events else 0.0,
        "events": counts,
        "last_metrics": last_metrics,
    }


def main(argv: list[str] | None = None) -> int:
    """``python -m hosts.agent.qlog DIR_OR_FILES... [--json]``: summarise qlog files."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m hosts.agent.qlog", description=main.__doc__)
    parser.add_argument("paths", nargs="+", help="qlog files or directories holding them")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    files: list[Path] = []
    for p in map(Path, args.paths):
        files.extend(sorted(p.glob(f"*{SUFFIX}")) if p.is_dir() else [p])
    out = []
    for f in files:
        try:
            out.append(summarize(f))
        except (OSError, ValueError) as exc:
            print(f"{f}: {exc}", file=sys.stderr)
            return 1
    if args.json:
        print(json.dumps(out))
        return 0
    for s in out:
        who = f"{s['host']} " + ("agent" if s["qpn"] is None else f"qp {s['qpn']}")
        events = ", ".join(f"{k.split(':', 1)[-1]}={v}" for k, v in sorted(s["events"].items()))
        print(f"{who:<16} {s['span_ms'] / 1000:8.2f} s  {events}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
