"""Collectives on real buffers, run by GPU hosts of a photonic scale-up domain.

``plan`` reads the collective plan a run hands out (controller/harvest/runplan.py writes it),
``runner`` executes it on one GPU over the mrc.h-shaped API: MRC Writes carry the blocks,
WriteImm signals a step's arrival, reductions are numpy sums, and a barrier (the controller's)
separates steps while the OCS is reconfigured.
"""
