"""End-to-end fabric runs: topology -> Mininet net + switches + controller + agents -> workloads.

See docs/fabric.md. Modules: plan (names/addresses), builder (Mininet), orchestrator (start
order, roll back, stop), hostjobs (workload roles inside agents), workloads, failures,
liveview (counters, EV states), results (JSON + plots), cli_shell (interactive CLI).
"""
