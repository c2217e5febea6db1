"""The fabric on a simulated clock: the real P4 pipeline and traffic manager of every switch,
driven by one discrete-event scheduler instead of sockets and wall time (docs/simulation.md)."""
