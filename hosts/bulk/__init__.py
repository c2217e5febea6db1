"""Bulk traffic over the API: the one writer, sink and verification every workload uses.

The agent's apps (hosts/apps.py), the fabric's workload jobs (mrcnet/fabric/hostjobs.py), the
mechanism lab (testbed/mechanism_lab.py) and the benchmarks move data with these pieces:

- ``data``: the writer's reproducible ``pattern``, ``digest``s, byte-exact comparison;
- ``endpoint``: a QP with its CQ and registered buffer (``Endpoint``), what it tells its peer
  (``PeerInfo``), and the file handshake that connects a writer and its sink;
- ``writer``: ``write_buffer`` posts a buffer in chunks, ``depth`` deep, WriteImms as
  ``Immediates`` says, and counts the completions;
- ``sink``: ``await_writeimms`` waits for the WriteImm receive completions in send order;
- ``completions``: ``collect`` gathers completions until enough, a failure or a deadline;
- ``oob``: the out-of-band files (atomic JSON records, the done marker
  ``publish_done``/``await_done``), also the collectives' QP exchange.
"""

from hosts.bulk.completions import collect
from hosts.bulk.data import digest, first_difference, pattern, pattern_digest
from hosts.bulk.endpoint import Endpoint, PeerInfo, connect_by_files
from hosts.bulk.oob import await_done, await_published, publish, publish_done, write_json
from hosts.bulk.sink import Arrival, arrival_errors, await_writeimms
from hosts.bulk.writer import (
    DONE_IMM,
    Immediates,
    WriteOutcome,
    work_request,
    wr_count,
    write_buffer,
)

__all__ = ["DONE_IMM", "Arrival", "Endpoint", "Immediates", "PeerInfo", "WriteOutcome",
           "arrival_errors", "await_done", "await_published", "await_writeimms", "collect",
           "connect_by_files", "digest", "first_difference", "pattern", "pattern_digest",
           "publish", "publish_done", "work_request", "wr_count", "write_buffer", "write_json"]
