"""The MRC host endpoint, in layers: the wire codec, the sans-I/O transport core, the agent
(NIC I/O and the event loop), the application API on an agent, and above it the apps and the
collectives. ``python -m hosts --config FILE.json`` runs one host: an agent and its apps."""
