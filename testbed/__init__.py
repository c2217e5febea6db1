"""Harnesses and benchmarks that exercise the product packages from outside.

``testbed.switch_lab`` and ``testbed.host_lab`` build small labs (switch processes on veths,
host agents in namespaces) for the emulation tests and the benchmarks; ``testbed.bench``
holds the benchmarks behind `mrcnet bench`. The product packages never import this package.
"""
