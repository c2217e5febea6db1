"""Runs inside the p4runtime-shell virtual environment (its own protobuf and p4runtime pins):
executes the Python snippets a test sends, one JSON object per line on stdin, with
``p4runtime_sh.shell`` as ``sh``, and answers one JSON object per line on stdout.

A snippet sets ``result`` to return a JSON value; an exception comes back as its class
name, message and, for write errors, the per-update (canonical code, message) pairs.
Protobuf messages cross as hex strings (``msg_hex``), which the test parses with its own
bindings. This file imports nothing of the project: it runs under another protobuf.
"""

import json
import sys
import traceback

import grpc
import p4runtime_sh.shell as sh
from p4runtime_sh.p4runtime import P4RuntimeWriteException


def msg_hex(msg):
    return None if msg is None else msg.SerializeToString().hex()


def read_hex(table):
    return [msg_hex(e.msg()) for e in sh.TableEntry(table).read()]


def route_entry(prefix, plen, port, table="MrcIngress.ipv6_route",
                action="MrcIngress.set_nexthop"):
    te = sh.TableEntry(table)(action=action)
    te.match["hdr.ipv6.dst_addr"] = f"{prefix}/{plen}"
    te.action["port"] = str(port)
    te.action["smac"] = "02:00:00:00:00:99"
    te.action["dmac"] = f"02:00:00:00:00:{port:02x}"
    return te


ANSWERS = sys.stdout
sys.stdout = sys.stderr  # what the shell prints itself never mixes with the answers


def answer(obj):
    ANSWERS.write(json.dumps(obj) + "\n")
    ANSWERS.flush()


def main():
    scope = {"sh": sh, "msg_hex": msg_hex, "read_hex": read_hex, "route_entry": route_entry}
    answer({"ready": True})
    for line in sys.stdin:
        scope["result"] = None
        try:
            exec(json.loads(line)["code"], scope)
            answer({"result": scope["result"]})
        except P4RuntimeWriteException as exc:
            answer({"exc": "P4RuntimeWriteException", "message": str(exc),
                    "errors": [[e.canonical_code, e.message] for _, e in exc.errors]})
        except grpc.RpcError as exc:
            answer({"exc": "RpcError", "message": str(exc.details()), "code": exc.code().name})
        except Exception as exc:
            answer({"exc": type(exc).__name__, "message": str(exc),
                    "trace": traceback.format_exc()})


if __name__ == "__main__":
    main()
