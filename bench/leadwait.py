"""Where group commit's time goes: the leader's CPU, its wait for a processor, its sleeps.

With eight writers someone is leading nearly all the time, so the leader is the serial part
every writer waits on. This runs ``--writers`` spawned processes creating ``--ops`` memories
each on a populated bare store (``gc.auto=0``: no packing in the way) and reports, besides
the rate and the CPU per commit, the leading writers' time split by Linux's
``/proc/self/schedstat`` into on a processor, waiting for one (the run queue), and asleep::

    python -m bench.leadwait --writers 8 --ops 50
    python -m bench.leadwait --writers 1 --ops 400

Alternate it with ``GITMEM_BENCH_ROOT=/path/to/another/checkout`` to compare two versions in
one run: the root is put first on ``sys.path`` in every process, so its ``bench`` is the one
imported and must hold this file too (copy it into an older checkout). Linux only.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import resource
import statistics
import sys
import tempfile
import time
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

_ROOT = os.environ.get("GITMEM_BENCH_ROOT")
if _ROOT:
    sys.path.insert(0, _ROOT)


def _sched() -> tuple[float, float]:
    """Seconds this thread ran, and waited to run, so far (``/proc/self/schedstat``)."""
    with open("/proc/thread-self/schedstat") as fh:
        ran, waited, _ = fh.read().split()
    return int(ran) / 1e9, int(waited) / 1e9


def _writer(path: str, ops: int, seed: int, barrier: Barrier, out: Any) -> None:
    import gitmem
    from bench.fixtures import fields_for
    from gitmem.git import groupcommit

    leading: list[tuple[float, float, float, float]] = []
    lead = groupcommit.CommitQueue._lead

    def timed(self: groupcommit.CommitQueue, *args: Any, **kwargs: Any) -> Any:
        start, cpu = time.perf_counter(), time.thread_time()
        _, waited = _sched()
        try:
            return lead(self, *args, **kwargs)
        finally:
            _, waited_end = _sched()
            leading.append(
                (start, time.perf_counter() - start, time.thread_time() - cpu, waited_end - waited)
            )

    groupcommit.CommitQueue._lead = timed  # type: ignore[method-assign]
    rng = random.Random(seed)
    store = gitmem.open(path)
    warm = fields_for(-1, rng)
    store.create(warm.body, **warm.create_kwargs())
    batch = [fields_for(i, rng) for i in range(ops)]
    barrier.wait()
    usage = resource.getrusage(resource.RUSAGE_SELF)
    start = time.perf_counter()
    latencies = []
    for fields in batch:
        began = time.perf_counter()
        store.create(fields.body, **fields.create_kwargs())
        latencies.append(time.perf_counter() - began)
    end = time.perf_counter()
    after = resource.getrusage(resource.RUSAGE_SELF)
    cpu = after.ru_utime - usage.ru_utime + after.ru_stime - usage.ru_stime
    out.put((start, end, cpu, latencies, [x for x in leading if x[0] >= start]))


def main(argv: list[str] | None = None) -> int:
    from bench.fixtures import populate

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writers", type=int, default=8)
    parser.add_argument("--ops", type=int, default=50)
    parser.add_argument("--size", type=int, default=1000)
    args = parser.parse_args(argv)
    import pygit2

    with tempfile.TemporaryDirectory(prefix="gitmem-leadwait-") as tmp:
        path = Path(tmp) / "store.git"
        populate(path, args.size, bare=True, rng=random.Random(1), format=4)
        pygit2.Repository(str(path)).config["gc.auto"] = "0"
        ctx = multiprocessing.get_context("spawn")
        barrier = ctx.Barrier(args.writers)
        out = ctx.Queue()
        procs = [
            ctx.Process(target=_writer, args=(str(path), args.ops, 100 + i, barrier, out))
            for i in range(args.writers)
        ]
        for proc in procs:
            proc.start()
        results = [out.get(timeout=600) for _ in procs]
        for proc in procs:
            proc.join()
    span = max(r[1] for r in results) - min(r[0] for r in results)
    commits = args.writers * args.ops
    cpu = sum(r[2] for r in results)
    latencies = sorted(x for r in results for x in r[3])
    leads = [x for r in results for x in r[4]]
    wall = sum(x[1] for x in leads)
    lead_cpu = sum(x[2] for x in leads)
    queued = sum(x[3] for x in leads)
    print(
        f"{args.writers} writer(s) x {args.ops}: {commits / span:.0f} commits/s, "
        f"{cpu / commits * 1e3:.2f} ms of CPU a commit ({cpu / span:.2f} processors busy), "
        f"latency p50 {statistics.median(latencies) * 1e3:.1f} ms; "
        f"load average {os.getloadavg()[0]:.2f}"
    )
    print(
        f"  leading {wall / span:.0%} of the span: {lead_cpu / commits * 1e3:.2f} ms of CPU "
        f"a commit; of its {wall:.2f} s, {lead_cpu:.2f} on a processor, {queued:.2f} waiting "
        f"for one, {max(wall - lead_cpu - queued, 0):.2f} asleep"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
