"""The benchmark command: ``python -m bench`` (or ``python bench/run.py``).

Examples::

    python -m bench --quick                 # about a minute
    python -m bench --out results.md        # 1k and 10k memories, 20k commits: minutes
    python -m bench --sizes 1000,10000,100000 --history-commits 100000   # the issue's sizes
    python -m bench --sizes 1000,10000 --repeat 3
    python -m bench --tiny                  # seconds: proves the command works
    python -m bench --only read,history --quick
    python -m bench --list
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
import traceback
from collections.abc import Sequence
from pathlib import Path

if __package__ in (None, ""):  # run as a script: make the repository root importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import bench.doctorbench  # registers the doctor scenario (after hook-run: it imports that)
import bench.hookrun  # registers the scenarios (hook-run after them)
import bench.reviewbench  # noqa: F401  (registers review, after doctor: it imports that)
from bench import (
    clibench,  # noqa: F401  (registers cli-latency)
    graphbench,  # noqa: F401  (registers mcp-graph)
    lexbench,  # noqa: F401  (registers recall-latency)
    memtoolbench,  # noqa: F401  (registers memtool)
    recall_quality,  # noqa: F401  (registers recall-quality)
    scalebench,  # noqa: F401  (registers autopack and group-commit)
)
from bench.fixtures import Context, workspace
from bench.harness import SCENARIOS, Config, Row, log, preset, set_quiet, sizes_config
from bench.report import cpu_stall_total, document


def _ints(text: str) -> list[int]:
    try:
        values = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        message = f"{text!r} is not a comma-separated list of numbers"
        raise argparse.ArgumentTypeError(message) from None
    if not values or any(v < 1 for v in values):
        raise argparse.ArgumentTypeError(f"{text!r} needs positive numbers")
    return values


def _names(text: str) -> list[str]:
    names = [part.strip() for part in text.split(",") if part.strip()]
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise argparse.ArgumentTypeError(
            f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}"
        )
    return names


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m bench",
        description="Benchmark gitmem beside git and plain files, and write a markdown table.",
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="small sizes: about a minute")
    size.add_argument("--tiny", action="store_true", help="toy sizes: seconds (for the tests)")
    p.add_argument(
        "--sizes",
        type=_ints,
        help="store sizes for create and bulk import, e.g. 1000,10000,100000 "
        "(the largest also sets read and store size; work-tree create uses those up to 10k, "
        "writers the largest up to 10k, latest_version the largest, history the largest "
        "up to the preset's commits)",
    )
    p.add_argument("--worktree-sizes", type=_ints, help="sizes for work-tree create")
    p.add_argument("--history-commits", type=int, help="commits in the history store")
    p.add_argument("--latest-size", type=int, help="store size for latest_version")
    p.add_argument(
        "--catchup-commits", type=int, help="new commits the index catches up with"
    )
    p.add_argument(
        "--hook-size", type=int, help="memories in the project store of the hook-run scenario"
    )
    p.add_argument(
        "--budget",
        type=float,
        help="seconds after which a slow scenario (index rebuild, catch-up) stops repeating",
    )
    p.add_argument("--writers", type=_ints, help="writer process counts, e.g. 1,2,4,8")
    p.add_argument("--writers-size", type=int, help="store size for concurrent writers")
    p.add_argument("--repeat", type=int, help="timed runs per figure (the median is reported)")
    p.add_argument(
        "--slow-repeat", type=int, help="timed runs of history and latest_version (seconds each)"
    )
    p.add_argument("--ops", type=int, help="creates per timed run")
    p.add_argument("--git-ops", type=int, help="git add + commit rounds per timed run")
    p.add_argument("--reads", type=int, help="random ids read per timed run")
    p.add_argument("--writer-ops", type=int, help="creates per writer process per round")
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
    mode = "tiny" if args.tiny else "quick" if args.quick else "full"
    config = preset(mode)
    if args.sizes:
        config = sizes_config(config, args.sizes)
    overrides = {
        "worktree_sizes": args.worktree_sizes,
        "history_commits": args.history_commits,
        "latest_size": args.latest_size,
        "catchup_commits": args.catchup_commits,
        "hook_size": args.hook_size,
        "budget": args.budget,
        "writers": args.writers,
        "writers_size": args.writers_size,
        "repeat": args.repeat,
        "slow_repeat": args.slow_repeat,
        "ops": args.ops,
        "git_ops": args.git_ops,
        "reads": args.reads,
        "writer_ops": args.writer_ops,
        "seed": args.seed,
        "workdir": args.workdir,
    }
    for key, value in overrides.items():
        if value is not None:
            setattr(config, key, value)
    config.keep = args.keep
    config.only = args.only
    config.skip = args.skip
    smallest = min(
        [*config.sizes, *config.worktree_sizes, config.read_size, config.latest_size,
         config.hook_size]
    )
    if smallest < 10:
        raise SystemExit("python -m bench: store sizes must be at least 10")
    if config.history_commits < config.history_updates + 2:
        raise SystemExit(
            f"python -m bench: --history-commits must be at least {config.history_updates + 2}"
        )
    return config


def run(config: Config) -> tuple[list[Row], bool]:
    """Run the selected scenarios; returns the rows and whether every scenario succeeded."""
    import random

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
    command = "python -m bench " + " ".join(
        shlex.quote(a) for a in (sys.argv[1:] if argv is None else argv)
    )
    started = time.perf_counter()
    load_before = os.getloadavg()[0]
    stall_before = cpu_stall_total()
    rows, ok = run(config)
    seconds = time.perf_counter() - started
    load = (load_before, os.getloadavg()[0])
    stall_after = cpu_stall_total()
    stall = (
        (stall_after - stall_before) / seconds
        if stall_before is not None and stall_after is not None and seconds > 0
        else None
    )
    text = document(rows, config, command.strip(), seconds, load, stall)
    print(text)
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(text, encoding="utf-8")
    if args.json is not None:
        args.json.write_text(json.dumps([r.to_dict() for r in rows], indent=2) + "\n")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
