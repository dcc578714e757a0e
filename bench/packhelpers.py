"""What automatic packing costs writers: the packing helpers they start, counted and timed.

The official ``group-commit`` scenario runs with packing on, as gitmem ships, and its CPU
figures are the writers' own: a packing helper runs detached, in its own session, so its
CPU (Python's start-up, and the ``git repack`` it runs) shows nowhere. Here each writer
waits for the last helper it started once its creates are done and reads
``RUSAGE_CHILDREN``: the helpers it started and reaped, with their git processes. A
helper still at work at the end of a round is waited for; one started by another process
is counted by that process.

Every round uses a fresh 1k bare store, imported in one transaction and packed once
before the clock starts (a store that has been written a while), ``--commits`` creates in
all by 1 or N spawned writers. ``--roots`` alternates checkouts in one run (the first
used for the store and the tree whose ``gitmem`` the writers import), e.g.::

    python -m bench.packhelpers --roots /work/main,/path/to/other --writers 1,8 --rounds 4

Each checkout must contain this file too (the spawned writers import it from the root
they run: copy it into an older checkout). Linux only.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any


def _writer(root: str, path: str, ops: int, seed: int, barrier: Barrier, out: Any) -> None:
    sys.path.insert(0, root)
    import gitmem
    from bench.fixtures import fields_for

    rng = random.Random(seed)
    store = gitmem.open(path)
    warm = fields_for(-1, rng)
    store.create(warm.body, **warm.create_kwargs())
    fields = [fields_for(i, rng) for i in range(ops)]
    barrier.wait()
    before = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    for f in fields:
        store.create(f.body, **f.create_kwargs())
    end = time.perf_counter()
    after = resource.getrusage(resource.RUSAGE_SELF)
    packer = store.db().autopack
    helper = packer._helper
    if helper is not None:
        helper.wait()  # reaped: its CPU joins RUSAGE_CHILDREN
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    own = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    out.put((start, end, own, children.ru_utime + children.ru_stime, packer.launched))


def _round(
    root: str, writers: int, commits: int, seed: int, packing: bool
) -> tuple[float, float, float, int]:
    """(commits/s, writers' ms of CPU a commit, helpers' ms a commit, helpers started).
    ``packing`` False: ``gc.auto=0`` once the store is packed (the writers never pack)."""
    from bench.harness import run_spawned  # here, before root: this checkout's

    sys.path.insert(0, root)
    try:
        from bench.fixtures import populate

        with tempfile.TemporaryDirectory(prefix="gitmem-packhelpers-") as tmp:
            path = Path(tmp) / "store.git"
            populate(path, 1000, bare=True, rng=random.Random(1))
            env = dict(os.environ, PYTHONPATH=root)
            subprocess.run(
                [sys.executable, "-P", "-m", "gitmem.git.autopack", str(path)],
                env=env,
                check=True,
                cwd=tmp,
            )
            if not packing:
                subprocess.run(
                    ["git", "--git-dir", str(path), "config", "gc.auto", "0"], check=True
                )
            ops = commits // writers
            results = run_spawned(
                _writer, [(root, str(path), ops, seed + i) for i in range(writers)]
            )
    finally:
        sys.path.remove(root)
        for name in [m for m in sys.modules if m == "bench" or m.startswith(("bench.", "gitmem"))]:
            del sys.modules[name]  # the next root's modules, not these
    done = ops * writers
    span = max(r[1] for r in results) - min(r[0] for r in results)
    return (
        done / span,
        1e3 * sum(r[2] for r in results) / done,
        1e3 * sum(r[3] for r in results) / done,
        sum(r[4] for r in results),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--roots", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--writers", default="1,8")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--commits", type=int, default=1600)
    parser.add_argument(
        "--packing", default="on", help="on, off (gc.auto=0), or on,off to alternate both"
    )
    args = parser.parse_args(argv)
    roots = [str(Path(r).resolve()) for r in args.roots.split(",")]
    counts = [int(n) for n in args.writers.split(",")]
    modes = [m.strip() == "on" for m in args.packing.split(",")]
    runs = [(root, packing) for root in roots for packing in modes]
    rows: dict[tuple[str, bool, int], list[tuple[float, float, float, int]]] = {}
    for number in range(args.rounds):
        for writers in counts:
            for root, packing in runs if number % 2 == 0 else runs[::-1]:
                row = _round(root, writers, args.commits, 100 + 10 * number, packing)
                rows.setdefault((root, packing, writers), []).append(row)
                label = f"{Path(root).name}, packing {'on' if packing else 'off'}"
                print(
                    f"{label}, round {number + 1}, {writers} writer(s): "
                    f"{row[0]:.0f} commits/s; writers {row[1]:.2f} ms of CPU a commit, "
                    f"packing helpers {row[2]:.2f} ms ({row[3]} started); "
                    f"load {os.getloadavg()[0]:.1f}, {time.strftime('%H:%M:%S', time.gmtime())}",
                    flush=True,
                )
    print("medians:")
    for (root, packing, writers), found in rows.items():
        print(
            f"  {Path(root).name}, packing {'on' if packing else 'off'}, {writers} writer(s): "
            f"{statistics.median(r[0] for r in found):.0f} commits/s, writers "
            f"{statistics.median(r[1] for r in found):.2f} ms a commit, helpers "
            f"{statistics.median(r[2] for r in found):.2f} ms a commit, "
            f"{statistics.median(r[3] for r in found):.0f} helpers started"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
