"""What each pack in a store costs a create: ``Store.create`` CPU against the pack count.

libgit2 looks every object a write makes up in each pack of the store before writing it
loose (and every object it reads in each pack until found), so a store's pack count is a
cost on every write. This makes one store of ``--size`` memories in one pack, then adds
incremental packs of 40 creates each (as the automatic packer leaves them), copies the
store at each of ``--counts`` packs, and times rounds of ``--ops`` creates into each copy
(``gc.auto=0``: nothing packs during the timing), alternating the order, as CPU a create::

    python -m bench.packcount --size 10000 --counts 1,5,10,25,50 --rounds 7
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import gitmem
from bench.fixtures import fields_for, populate
from gitmem.git import autopack


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _git(path: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True)


def _measure(path: Path, ops: int, seed: int) -> float:
    store = gitmem.open(str(path))
    rng = random.Random(seed)
    batch = [fields_for(10**7 + seed * 1000 + i, rng) for i in range(ops + 5)]
    for item in batch[:5]:  # warm: the handle, the caches
        store.create(item.body, **item.create_kwargs())
    started = _cpu()
    for item in batch[5:]:
        store.create(item.body, **item.create_kwargs())
    return (_cpu() - started) / ops * 1e6


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--counts", default="1,5,10,25,50")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--ops", type=int, default=100)
    args = parser.parse_args(argv)
    counts = sorted({int(x) for x in args.counts.split(",")})
    base = Path(tempfile.mkdtemp(prefix="gitmem-packcount-"))
    try:
        source = base / "source.git"
        populate(source, args.size, bare=True, rng=random.Random(1), format=4)
        deadline = time.monotonic() + 300
        while autopack._busy(source) and time.monotonic() < deadline:
            time.sleep(0.1)  # the import's own packing moves files under the copies
        _git(source, "config", "gc.auto", "0")
        _git(source, "repack", "-a", "-d", "-q")
        writer = gitmem.open(str(source))
        rng = random.Random(2)
        made = 0
        copies: dict[int, Path] = {}
        for count in range(1, counts[-1] + 1):
            if count > 1:
                for _ in range(40):
                    item = fields_for(args.size + made, rng)
                    made += 1
                    writer.create(item.body, **item.create_kwargs())
                _git(source, "repack", "-d", "-l", "-q")
            if count in counts:
                copies[count] = base / f"packs-{count}.git"
                shutil.copytree(source, copies[count])
        results: dict[int, list[float]] = {count: [] for count in copies}
        for number in range(args.rounds):
            order = list(copies.items())
            for count, path in order if number % 2 == 0 else reversed(order):
                results[count].append(_measure(path, args.ops, number * 100 + count))
    finally:
        shutil.rmtree(base, ignore_errors=True)
    print(f"{args.size:,} memories, {args.ops} creates a round, {args.rounds} rounds "
          f"(load {os.getloadavg()[0]:.2f})")
    for count, values in results.items():
        ordered = sorted(values)
        quarter = len(ordered) // 4
        print(f"  {count:3d} packs: {statistics.median(values):6,.0f} µs CPU a create "
              f"(quartiles {ordered[quarter]:,.0f}-{ordered[-quarter - 1]:,.0f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
