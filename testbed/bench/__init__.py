"""The benchmarks behind `mrcnet bench NAME`; each module is named after what it measures.

Each exposes ``add_arguments(parser)`` and ``run(args) -> int`` and prints its figures (one
JSON object with ``--json``); mrcnet/bench.py maps the command's names to these modules.
"""
