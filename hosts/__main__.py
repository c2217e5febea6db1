"""``python -m hosts --config FILE.json``: run a host agent, optionally with apps.

The loop runs in the main thread; each app of the config runs in its own thread with an open
device context (``function(context, args) -> int``). With apps, the agent exits when all of
them have returned (exit status: the largest app status, 1 for an app that raised); without
apps it runs until SIGTERM/SIGINT. It prints ``agent NAME ready`` (flushed) once its ports are
open, which is what orchestrators wait for. ``--tdf``/``--clock-epoch`` (or MRCNET_TDF /
MRCNET_CLOCK_EPOCH) put the agent, its transport core and its apps on the run's virtual
clock (common/vclock.py).
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any

from common import vclock
from hosts.agent.agent import Agent
from hosts.agent.config import AppConfig, ConfigError, load_config


def _resolve(target: str) -> Callable[..., Any]:
    module_name, _, func_name = target.partition(":")
    module = importlib.import_module(module_name)
    fn = getattr(module, func_name, None)
    if not callable(fn):
        raise ConfigError(f"app target {target!r}: {func_name!r} is not a function of "
                          f"{module_name}")
    return fn  # type: ignore[no-any-return]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m hosts", description=__doc__)
    parser.add_argument("--config", required=True, help="agent configuration (JSON)")
    vclock.add_arguments(parser)
    parser.add_argument("--lag-tolerance", type=float, default=None, metavar="S",
                        help="lag (virtual seconds) up to which a timer or a received frame "
                             "counts as on time (default: 2 ms of wall time)")
    parser.add_argument("--coalesce", type=float, default=0.0, metavar="S",
                        help="wake-up coalescing slack (virtual seconds): while frames and "
                             "timers come densely, handle them in rounds at most S apart, each "
                             "at most S late (common/coalesce.py; default 0: one wake-up per "
                             "event)")
    args = parser.parse_args(argv)
    if args.lag_tolerance is not None and not args.lag_tolerance > 0:
        parser.error("--lag-tolerance must be > 0 seconds")
    if not 0 <= args.coalesce < 1:
        parser.error("--coalesce must be >= 0 and < 1 second")
    try:
        clock = vclock.RunClock.from_args(args)
        config = load_config(args.config)
        apps = [(a, _resolve(a.target)) for a in config.apps]
    except (ConfigError, ImportError, vclock.ClockError) as exc:
        print(f"agent: {exc}", file=sys.stderr)
        return 2
    from hosts.api import open_device

    agent = Agent(config, run_clock=clock, lag_tolerance=args.lag_tolerance,
                  coalesce=args.coalesce)
    from hosts.agent.ctl_link import CtlLinkError, start_from_config_file
    try:
        ctl = start_from_config_file(agent, args.config)  # controller registration, if configured
    except CtlLinkError as exc:
        print(f"agent: {exc}", file=sys.stderr)
        agent.close()
        return 2
    statuses: dict[int, int] = {}
    remaining = [len(apps)]
    lock = threading.Lock()

    def run_app(i: int, app: AppConfig, fn: Callable[..., Any]) -> None:
        status = 1
        try:
            ctx = open_device(agent)
            try:
                status = int(fn(ctx, dict(app.args)) or 0)
            finally:
                ctx.close()
        except Exception:
            traceback.print_exc()
        with lock:
            statuses[i] = status
            remaining[0] -= 1
            if remaining[0] == 0:
                agent.request_stop()

    signal.signal(signal.SIGTERM, lambda *_: agent.request_stop())
    signal.signal(signal.SIGINT, lambda *_: agent.request_stop())
    threads = [
        threading.Thread(target=run_app, args=(i, app, fn), name=f"app-{i}", daemon=True)
        for i, (app, fn) in enumerate(apps)
    ]
    if os.environ.get("MRC_AGENT_GC_TUNE", "1") == "1":
        # The data path allocates many short-lived, acyclic objects (packets, headers): keep
        # the cyclic collector from running every few hundred packets.
        gc.freeze()
        gc.set_threshold(200_000, 50, 100)
    print(f"agent {config.name} ready", flush=True)
    for t in threads:
        t.start()
    profile_path = os.environ.get("MRCNET_AGENT_PROFILE")  # developers: cProfile the loop
    profiler = cProfile.Profile() if profile_path else None
    try:
        if profiler is not None:
            profiler.runcall(agent.run)
        else:
            agent.run()
    finally:
        if profiler is not None and profile_path:
            profiler.dump_stats(f"{profile_path}.{config.name}")
        if ctl is not None:
            ctl.close()
        agent.stop()
    for i, (app, _fn) in enumerate(apps):
        print(f"app {app.target}: exit {statuses.get(i, 'not finished')}", flush=True)
    if len(statuses) < len(apps):
        return 1
    return max(statuses.values(), default=0)


if __name__ == "__main__":
    sys.exit(main())
