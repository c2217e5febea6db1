"""MRC host agent: NIC ports (AF_PACKET), the event loop around HostCore, qlog.

Library use: ``Agent(config).start()`` runs the loop in a thread of the application, which
then uses hosts.api (the layer above this one). Process use: ``python -m hosts --config
FILE.json`` (hosts/__main__.py: the agent and its apps).
"""
