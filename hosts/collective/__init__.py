"""Collectives on real buffers, run by GPU hosts of a photonic scale-up domain.

The collective plan a run hands out is ``common.collective_plan.RunPlan`` (written by
controller/harvest/runplan.py); ``routes`` turns its routes into this GPU's router tables,
``runner`` executes it on one GPU over the mrc.h-shaped API: MRC Writes carry the blocks,
WriteImm signals a step's arrival, reductions are numpy sums, and a barrier (the controller's)
separates steps while the OCS is reconfigured.
"""
