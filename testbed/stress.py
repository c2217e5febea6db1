"""``make test-stress``: hunt flaky tests on purpose, as CI would meet them.

Each round clones the checkout into a fresh folder (nothing of this tree's caches, results
or virtual environment) at one commit for the whole series (``--commit``, default the HEAD
when the series starts: commits made meanwhile are not mixed in), then runs CI's own entry
point there (``.ci/run``, or
``make test`` with ``--make-test``). Rounds alternate the conditions that have found races
before: a busy machine (a one-core CPU hog beside the suite) and no IPv6 loopback on the root
namespace (``net.ipv6.conf.lo.disable_ipv6 = 1``, as some CI machines have). The setting is
restored after each round (and the value found at the start once more when the series
ends, however it ends), the hog is stopped by its pid, and the clone is removed unless
``--keep``. SIGTERM stops the series as Ctrl-C does. A summary table gives each round's conditions, time, exit status and pytest counts;
the exit status is 0 only when every round was green.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
IPV6_LO = Path("/proc/sys/net/ipv6/conf/lo/disable_ipv6")
SUMMARY = re.compile(r"^(=+ )?\d+ \w+(, \d+ \w+)* in [\d.]+s\b")
COUNTS = re.compile(r"(\d+) (passed|failed|errors?|skipped|xfailed|xpassed|deselected)")


@dataclass(frozen=True)
class Conditions:
    hog: bool
    ipv6_off: bool

    def label(self) -> str:
        return ", ".join([("CPU hog" if self.hog else "quiet"),
                          ("no IPv6 loopback" if self.ipv6_off else "IPv6 loopback")])


@dataclass
class Round:
    number: int
    conditions: Conditions
    seconds: float = 0.0
    status: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    failures: list[str] = field(default_factory=list)
    log: Path | None = None


def schedule(rounds: int, hog: str, ipv6: str) -> list[Conditions]:
    """The conditions of each round: ``alternate`` (the default) gives quiet rounds first,
    then hog rounds, and takes IPv6 loopback away from every other round."""
    out = []
    for i in range(rounds):
        with_hog = {"on": True, "off": False}.get(hog, i >= (rounds + 1) // 2)
        no_v6 = {"on": True, "off": False}.get(ipv6, i % 2 == 1)
        out.append(Conditions(with_hog, no_v6))
    return out


def _spin(deadline: float) -> None:
    while time.monotonic() < deadline:
        pass


@contextmanager
def cpu_hog(enabled: bool, limit_s: float) -> Iterator[None]:
    """One busy process beside the suite (bounded by ``limit_s``), stopped by its own pid."""
    if not enabled:
        yield
        return
    proc = multiprocessing.get_context("spawn").Process(
        target=_spin, args=(time.monotonic() + limit_s,), daemon=True)
    proc.start()
    try:
        yield
    finally:
        proc.terminate()
        proc.join(5)


@contextmanager
def ipv6_loopback_off(enabled: bool) -> Iterator[None]:
    """``disable_ipv6`` on the root namespace's loopback for the round; the old value back."""
    if not enabled:
        yield
        return
    if not IPV6_LO.exists():
        yield  # no IPv6 at all: the condition already holds
        return
    old = IPV6_LO.read_text().strip()
    IPV6_LO.write_text("1\n")
    try:
        yield
    finally:
        IPV6_LO.write_text(old + "\n")


def parse_counts(text: str) -> dict[str, int]:
    """pytest's final summary lines ("1301 passed, 2 failed in ...") of every pass, summed."""
    counts: dict[str, int] = {}
    for line in text.splitlines():
        if not SUMMARY.match(line):  # a pass's final line, not a test's output
            continue
        for n, what in COUNTS.findall(line):
            key = "errors" if what.startswith("error") else what
            counts[key] = counts.get(key, 0) + int(n)
    return counts


def failed_tests(text: str) -> list[str]:
    return sorted({m.group(1) for m in re.finditer(r"^(?:FAILED|ERROR) (\S+)", text, re.M)})


def _as_in_a_terminal() -> None:
    """CI's signal dispositions, whatever this runner inherited: started with ``&`` from a
    non-interactive shell it has SIGINT ignored, and every test of Ctrl-C would then fail."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _stop_group(proc: subprocess.Popen[bytes]) -> None:
    """SIGINT to the round's process group (as Ctrl-C would), a minute to clean up, then
    SIGKILL."""
    for sig, wait_s in ((signal.SIGINT, 60.0), (signal.SIGKILL, 10.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait_s)
            return
        except subprocess.TimeoutExpired:
            continue


def _interrupt(signum: int, _frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_round(r: Round, args: argparse.Namespace, workdir: Path) -> None:
    # beside the checkout, as CI's clone is, so ../shared (the optional P4 tools) is found
    clone = REPO.parent / f"{workdir.name}-round{r.number}"
    subprocess.run(["git", "clone", "--quiet", "--no-checkout", str(REPO), str(clone)],
                   check=True)
    subprocess.run(["git", "-C", str(clone), "checkout", "--quiet", "--detach", args.commit],
                   check=True)
    cmd = ["make", "test"] if args.make_test else ["bash", ".ci/run"]
    env = {**os.environ, "CI": "true"}
    r.log = workdir / f"round{r.number}.log"
    print(f"[stress] round {r.number}/{args.rounds} ({r.conditions.label()}): "
          f"{' '.join(cmd)} at {args.commit[:12]} in {clone}; log {r.log}", flush=True)
    t0 = time.monotonic()
    with cpu_hog(r.conditions.hog, args.timeout + 60), \
            ipv6_loopback_off(r.conditions.ipv6_off), r.log.open("w") as log:
        # its own process group: an interrupted series stops the whole round (the suite's
        # fabrics clean up on SIGINT) instead of orphaning it behind a killed shell
        proc = subprocess.Popen(cmd, cwd=clone, env=env, stdout=log, stderr=subprocess.STDOUT,
                                preexec_fn=_as_in_a_terminal, start_new_session=True)
        try:
            r.status = proc.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            _stop_group(proc)
            r.status = None
        except KeyboardInterrupt:
            _stop_group(proc)
            raise
    r.seconds = time.monotonic() - t0
    text = r.log.read_text(errors="replace")
    r.counts = parse_counts(text)
    r.failures = failed_tests(text)
    if not args.keep:
        shutil.rmtree(clone, ignore_errors=True)
    state = "timed out" if r.status is None else "green" if r.status == 0 else f"exit {r.status}"
    print(f"[stress] round {r.number}: {state} in {r.seconds:.0f} s {r.counts}"
          + (f"; failed: {', '.join(r.failures)}" if r.failures else ""), flush=True)


def table(rounds: list[Round]) -> str:
    lines = [f"{'round':>5}  {'conditions':<30} {'seconds':>8} {'status':>8}  counts"]
    for r in rounds:
        status = "timeout" if r.status is None else str(r.status)
        counts = ", ".join(f"{v} {k}" for k, v in sorted(r.counts.items()))
        lines.append(f"{r.number:>5}  {r.conditions.label():<30} {r.seconds:>8.0f} "
                     f"{status:>8}  {counts}")
        lines.extend(f"{'':>7}failed: {name}" for name in r.failures)
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="make test-stress", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--hog", choices=("alternate", "on", "off"), default="alternate",
                        help="a one-core CPU hog beside the suite (alternate: second half)")
    parser.add_argument("--ipv6", choices=("alternate", "on", "off"), default="alternate",
                        help="IPv6 loopback disabled (alternate: every other round)")
    parser.add_argument("--make-test", action="store_true",
                        help="run 'make test' in the clone instead of the whole '.ci/run'")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds per round")
    parser.add_argument("--keep", action="store_true", help="keep each round's clone")
    parser.add_argument("--commit", default="HEAD",
                        help="the commit every round tests (default: HEAD at the start)")
    parser.add_argument("--workdir", type=Path, help="where the logs go (default: a new "
                        "folder beside the checkout; each round's clone goes beside it)")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    if os.geteuid() != 0:
        print("make test-stress: needs root (the emulation tests, the IPv6 setting)",
              file=sys.stderr)
        return 2
    try:
        args.commit = subprocess.run(
            ["git", "-C", str(REPO), "rev-parse", "--verify", f"{args.commit}^{{commit}}"],
            check=True, capture_output=True, text=True).stdout.strip()
    except subprocess.CalledProcessError:
        parser.error(f"--commit {args.commit}: no such commit in {REPO}")
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="stress-", dir=REPO.parent))
    workdir.mkdir(parents=True, exist_ok=True)
    rounds = [Round(i + 1, c) for i, c in enumerate(schedule(args.rounds, args.hog, args.ipv6))]
    done: list[Round] = []
    ipv6_at_start = IPV6_LO.read_text() if IPV6_LO.exists() else None
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        for r in rounds:
            run_round(r, args, workdir)
            done.append(r)
    except KeyboardInterrupt:
        print("[stress] interrupted", file=sys.stderr)
    finally:
        if ipv6_at_start is not None:
            IPV6_LO.write_text(ipv6_at_start)
    print(table(done))
    green = sum(1 for r in done if r.status == 0)
    print(f"[stress] {green} of {len(done)} rounds green at {args.commit}; logs in {workdir}")
    return 0 if done and green == len(rounds) else 1


if __name__ == "__main__":
    raise SystemExit(main())
