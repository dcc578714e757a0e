"""A single create's CPU beside the bare-pygit2 floor, paired round by round (issue 17).

On a machine shared with other work, whole-run CPU figures move 2-4x between runs (system
time above all: file creation waits on locks the other processes hold). This alternates
short rounds of gitmem's ``Store.create`` and of the bare-pygit2 floor (a blob, the trees on
the file's path, a commit, the branch moved: ``bench.scenarios.pygit2_create``, the
same file bytes and commit message) on one bare store, in one process, and reports the
median of the per-round ratios floor / gitmem of CPU time (user + system), which stays
within a few percent where the totals do not::

    python -m bench.createcpu --size 1000 --rounds 30 --ops 20

``--format`` picks the store format (4, the default layout, or 3).
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import tempfile
from pathlib import Path

import pygit2

from bench.fixtures import fields_for, memory_text, new_memory_id, populate
from bench.scenarios import pygit2_create
from gitmem.base.clock import SystemClock
from gitmem.format.layout import memory_path


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def main(argv: list[str] | None = None) -> int:
    import gitmem

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--ops", type=int, default=20)
    parser.add_argument("--format", type=int, default=4)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print(f"load average {os.getloadavg()[0]:.2f}; {args.size:,} memories, format {args.format}")
    with tempfile.TemporaryDirectory(prefix="gitmem-createcpu-") as tmp:
        path = Path(tmp) / "store.git"
        populate(path, args.size, bare=True, rng=rng, format=args.format)
        repo = pygit2.Repository(str(path))
        repo.config["gc.auto"] = "0"  # nothing packs under the count
        store = gitmem.open(path)
        store.index().catch_up()
        legacy = args.format < 4
        signature = pygit2.Signature("bench", "bench@bench.invalid")
        per: dict[str, list[tuple[float, float]]] = {"gitmem": [], "floor": []}
        for number in range(args.rounds + 1):  # round 0 warms both up, untimed
            pool = [fields_for(args.size + number * args.ops + i, rng) for i in range(args.ops)]
            rendered = []
            for fields in pool:
                memory_id = new_memory_id(rng)
                text = memory_text(memory_id, fields, created=SystemClock().now())
                message = f"create: {fields.title}\n\nGitmem-Op: create\nGitmem-Id: {memory_id}\n"
                where = memory_path(memory_id, 3 if legacy else 4)
                rendered.append((where, text.encode(), message))
            user, system = _cpu()
            for fields in pool:
                store.create(fields.body, **fields.create_kwargs())
            mid_user, mid_system = _cpu()
            for where, data, message in rendered:
                pygit2_create(repo, where, data, message, signature)
            end_user, end_system = _cpu()
            if number:
                per["gitmem"].append((mid_user - user, mid_system - system))
                per["floor"].append((end_user - mid_user, end_system - mid_system))
    ratios = sorted(
        (f[0] + f[1]) / (g[0] + g[1]) for g, f in zip(per["gitmem"], per["floor"], strict=True)
    )
    quarter = len(ratios) // 4
    for name, rows in per.items():
        user = statistics.median(u for u, _ in rows) / args.ops * 1e6
        system = statistics.median(s for _, s in rows) / args.ops * 1e6
        total = statistics.median(u + s for u, s in rows) / args.ops * 1e6
        print(
            f"{name:7s} µs CPU per create: user {user:,.0f}, system {system:,.0f}, "
            f"total {total:,.0f} (medians of {args.rounds} rounds of {args.ops})"
        )
    print(
        f"floor / gitmem, CPU per round: median {statistics.median(ratios):.2f} "
        f"(quartiles {ratios[quarter]:.2f}-{ratios[-quarter - 1]:.2f}); "
        f"load average at the end {os.getloadavg()[0]:.2f}"
    )
    # User time alone (gitmem's own Python is user time; the system time the load adds to both
    # sides moves the ratio above, 0.54-0.78, with no change in gitmem), over all rounds: the
    # kernel splits a process's CPU into user and system by sampling at its clock tick, so
    # one round's split is a handful of samples and only the totals are worth comparing.
    user = {name: sum(u for u, _ in rows) for name, rows in per.items()}
    print(
        f"floor / gitmem, user CPU of all rounds: {user['floor'] / user['gitmem']:.2f} "
        f"({user['gitmem'] / len(per['gitmem']) / args.ops * 1e6:,.0f} against "
        f"{user['floor'] / len(per['floor']) / args.ops * 1e6:,.0f} µs a create)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
