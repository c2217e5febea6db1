"""STF test runner: p4c's STF tests against the embedded target and, if installed, BMv2.

``python -m switch.stf DIR|FILE [--json] [--target embedded|bmv2|both]`` (also
``mrcnet p4 stf``); see docs/switch.md.
"""
