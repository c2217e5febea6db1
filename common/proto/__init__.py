"""Protocol definitions shared by processes (generated *_pb2 modules are committed)."""
