"""MRC host agent: NIC ports (AF_PACKET), the event loop around HostCore, qlog, app runner.

Library use: ``Agent(config).start()`` runs the loop in a thread of the application, which
then uses hosts.api. Process use: ``python -m hosts.agent --config FILE.json``.
"""
