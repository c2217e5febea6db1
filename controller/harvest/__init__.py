"""Harvest: synthesis of optical reconfiguration schedules for collectives.

Entry point: :func:`controller.harvest.engine.synthesize`. See docs/harvest.md for the model,
the exact definitions and which results are proven optimal.
"""
