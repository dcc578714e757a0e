"""The benchmark command: ``python -m bench``.

    python -m bench                      # every floor at its size (tens of minutes)
    python -m bench --quick              # the same, small (minutes)
    python -m bench --tiny               # seconds: proves the command works
    python -m bench --only history --history-commits 20000
    python -m bench --list
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

# Each module registers its scenarios; registration order is run order, so the writers of
# a store come before its readers.
# isort: off
from bench import scenarios, clibench, recall_latency, recall_quality, graphbench  # noqa: F401
# isort: on
from bench.fixtures import Context, workspace
from bench.harness import SCENARIOS, Config, Row, log, preset, set_quiet
from bench.report import cpu_stall_total, document

SIZES = ("create_size", "read_size", "recall_size", "history_commits", "graph_size")


def _names(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}"
        )
    return names


def _size(text: str) -> int:
    value = int(text.replace("_", "").replace(",", ""))
    if value < 10:
        raise argparse.ArgumentTypeError("sizes must be at least 10")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark gitmem beside git and its peers, and write a markdown table.",
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes: minutes")
    size.add_argument("--tiny", action="store_true", help="toy sizes: seconds (for the tests)")
    for name in SIZES:
        p.add_argument("--" + name.replace("_", "-"), type=_size, help="override the preset")
    p.add_argument("--repeat", type=int, help="timed runs per figure (the median is reported)")
    p.add_argument("--only", type=_names, default=[], help="run only these scenarios")
    p.add_argument("--skip", type=_names, default=[], help="skip these scenarios")
    p.add_argument("--out", type=Path, help="also write the markdown table to this file")
    p.add_argument("--json", type=Path, help="also write the rows as JSON to this file")
    p.add_argument("--workdir", type=Path, help="where scratch stores go (default: system tmp)")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    p.add_argument("--seed", type=int, help="random seed for the generated memories")
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    return p


def config_from(args: argparse.Namespace) -> Config:
    config = preset("tiny" if args.tiny else "quick" if args.quick else "full")
    for key in (*SIZES, "repeat", "seed", "workdir"):
        if getattr(args, key) is not None:
            setattr(config, key, getattr(args, key))
    config.keep, config.only, config.skip = args.keep, args.only, args.skip
    if config.history_commits < config.history_updates + 2:
        raise SystemExit(f"--history-commits must be at least {config.history_updates + 2}")
    return config


def run(config: Config) -> tuple[list[Row], bool]:
    """Run the selected scenarios; returns the rows and whether every scenario succeeded."""
    rows: list[Row] = []
    ok = True
    with workspace(config) as root:
        ctx = Context(config, root, random.Random(config.seed))
        for name, item in SCENARIOS.items():
            if (config.only and name not in config.only) or name in config.skip:
                continue
            reason = item.requires() if item.requires is not None else None
            if reason is not None:
                log(f"{name}: pending ({reason})")
                rows.append(Row(item.title, "—", "—", None, note=f"pending: {reason}"))
                continue
            log(f"== {name}: {item.title}")
            started = time.perf_counter()
            try:
                rows.extend(item.func(ctx))
            except Exception as exc:
                ok = False
                traceback.print_exc(file=sys.stderr)
                rows.append(Row(item.title, "—", "—", None, note=f"FAILED: {exc}"))
            log(f"   {name} took {time.perf_counter() - started:.1f} s")
    return rows, ok


def main(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.list:
        for name, item in SCENARIOS.items():
            reason = item.requires() if item.requires is not None else None
            print(f"{name:16} {item.title}" + (f"  [pending: {reason}]" if reason else ""))
        return 0
    set_quiet(args.quiet)
    config = config_from(args)
    given = sys.argv[1:] if argv is None else argv
    command = " ".join(["python -m bench", *(shlex.quote(a) for a in given)])
    started, load_before, stall_before = time.perf_counter(), os.getloadavg()[0], cpu_stall_total()
    rows, ok = run(config)
    seconds = time.perf_counter() - started
    stall_after = cpu_stall_total()
    stall = (
        (stall_after - stall_before) / seconds
        if stall_before is not None and stall_after is not None and seconds > 0
        else None
    )
    text = document(rows, config, command, seconds, (load_before, os.getloadavg()[0]), stall)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    if args.json is not None:
        args.json.write_text(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
    return 0 if ok else 1
