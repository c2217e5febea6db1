"""``python -m switch.stf DIR|FILE``: run STF tests, print pass / fail / unsupported.

A directory runs every ``NAME.stf`` that has a ``NAME.p4`` beside it; a file names one test
(``.stf`` or ``.p4``). Programs are compiled with p4c-bm2-ss (``--program`` gives a ready
JSON instead, for one test). ``--target bmv2`` runs simple_switch, ``both`` runs the two and
a program passes only when it passes on each. ``--json`` prints one object:
{"programs": {NAME: "pass"|"fail"|"unsupported"}, "passed": N, "failed": N,
"unsupported": N} (with ``both``, also "targets": {target: {NAME: status}}).
Exit status: 0 when every program passed, 1 when one failed, 3 when none failed but some
were refused as unsupported (0 then with ``--allow-unsupported``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from switch.stf import embedded
from switch.stf.parse import StfError, parse_file
from switch.stf.toolchain import P4C, ToolError, compile_p4, find_tool

TARGETS = ("embedded", "bmv2", "both")


@dataclass
class Test:
    name: str
    stf: Path
    p4: Path | None
    json: Path | None = None
    compile_error: str = ""
    results: dict[str, tuple[str, str]] = field(default_factory=dict)  # target -> result


def discover(path: Path) -> list[Test]:
    if path.is_dir():
        tests = []
        for stf in sorted(path.glob("*.stf")):
            p4 = stf.with_suffix(".p4")
            if p4.exists():
                tests.append(Test(stf.stem, stf, p4))
        return tests
    if path.suffix == ".stf":
        p4 = path.with_suffix(".p4")
        return [Test(path.stem, path, p4 if p4.exists() else None)]
    if path.suffix == ".p4":
        return [Test(path.stem, path.with_suffix(".stf"), path)]
    raise SystemExit(f"stf: {path} is not a directory, .stf or .p4 file")


def build(tests: list[Test], build_dir: Path, jobs: int) -> None:
    """Compile every test's program (in parallel; p4c runs as a subprocess)."""

    def one(test: Test) -> None:
        if test.json is not None:
            return
        if test.p4 is None:
            test.compile_error = f"no P4 program for {test.stf.name}"
            return
        try:
            test.json = compile_p4(test.p4, build_dir / f"{test.name}.json")
        except ToolError as exc:
            test.compile_error = str(exc)

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, tests))


def run_test(test: Test, target: str, work: Path, backend: str = "auto") -> tuple[str, str]:
    if test.compile_error:
        return "fail", test.compile_error
    assert test.json is not None
    try:
        commands = parse_file(str(test.stf))
    except (OSError, StfError) as exc:
        return "fail", f"cannot read {test.stf.name}: {exc}"
    if target == "embedded":
        return embedded.run(test.json.read_bytes(), commands, test.name, backend)
    from switch.stf import bmv2

    try:
        return bmv2.run(test.json, commands, work / test.name)
    except ToolError as exc:
        return "fail", str(exc)


def combine(results: dict[str, tuple[str, str]]) -> tuple[str, str]:
    """One status over targets: pass when all pass; the embedded target's refusal wins."""
    if all(s == "pass" for s, _ in results.values()):
        return "pass", ""
    emb = results.get("embedded")
    if emb is not None and emb[0] == "unsupported":
        return emb
    for target, (status, why) in results.items():
        if status != "pass":
            return "fail", f"{target}: {why}"
    return "fail", ""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m switch.stf", description=__doc__.split("\n")[0])
    add_arguments(parser)
    return run(parser.parse_args(argv))


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("path", type=Path, help="a directory of NAME.p4 + NAME.stf, or one file")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--target", choices=TARGETS, default="embedded")
    parser.add_argument("--backend", choices=("auto", "python", "c"), default="auto",
                        help="embedded target: run the common path in C when eligible (auto, as "
                        "the switch does), always in Python, or require C")
    parser.add_argument("--program", type=Path, help="BMv2 JSON to use (one test only)")
    parser.add_argument("--build", type=Path, help="keep compiled programs and BMv2 logs here")
    parser.add_argument("--jobs", type=int, default=2, help="parallel compilations")
    parser.add_argument("-k", dest="match", default="", help="only tests whose name contains this")
    parser.add_argument("--allow-unsupported", action="store_true",
                        help="exit 0 when nothing failed, even if some programs were refused "
                             "as unsupported (by default only an all-pass run exits 0)")


def run(args: argparse.Namespace) -> int:
    tests = [t for t in discover(args.path) if args.match in t.name]
    if not tests:
        print(f"stf: no tests under {args.path}", file=sys.stderr)
        return 2
    if args.program is not None:
        if len(tests) != 1:
            print("stf: --program needs exactly one test", file=sys.stderr)
            return 2
        tests[0].json = args.program
    elif find_tool(P4C) is None:
        from common.p4toolchain import missing_message

        print(f"stf: {missing_message(P4C)} (or give a compiled program with --program)",
              file=sys.stderr)
        return 2
    targets = ["embedded", "bmv2"] if args.target == "both" else [args.target]
    with tempfile.TemporaryDirectory(prefix="mrcnet-stf-") as tmp:
        work = args.build or Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        build(tests, work, args.jobs)
        statuses: dict[str, str] = {}
        reasons: dict[str, str] = {}
        for test in tests:
            for target in targets:
                test.results[target] = run_test(test, target, work, args.backend)
            status, why = combine(test.results)
            statuses[test.name], reasons[test.name] = status, why
            if not args.json:
                line = f"{status.upper():12s} {test.name}"
                print(line + (f"  ({why})" if why else ""), flush=True)
    counts = {s: sum(1 for v in statuses.values() if v == s) for s in ("pass", "fail", "unsupported")}
    if args.json:
        out: dict[str, object] = {
            "programs": statuses,
            "passed": counts["pass"],
            "failed": counts["fail"],
            "unsupported": counts["unsupported"],
            "reasons": {k: v for k, v in reasons.items() if v},
        }
        if len(targets) > 1:
            out["targets"] = {t: {x.name: x.results[t][0] for x in tests} for t in targets}
        print(json.dumps(out, sort_keys=True))
    else:
        print(f"{len(tests)} programs ({'+'.join(targets)}): {counts['pass']} passed, "
              f"{counts['fail']} failed, {counts['unsupported']} unsupported")
    if counts["fail"]:
        return 1
    if counts["unsupported"] and not args.allow_unsupported:
        return 3  # nothing failed, but not everything was tested
    return 0
