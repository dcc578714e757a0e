"""Concurrent writers: N processes creating memories in one bare store at once.

Each writer is a fresh interpreter (``spawn``), opens the store itself and does one
untimed create; then, for each round, it waits at a barrier so all start together, creates
``ops`` memories and reports the ids gitmem acknowledged. Aggregate throughput is every
acknowledged create over the span from the first start to the last finish
(``perf_counter`` is the system-wide monotonic clock on Linux, so the writers' readings
compare). Afterwards the parent checks, in git directly, that every acknowledged id is in
the branch tip: a write gitmem acknowledged but lost would be a correctness bug, not a
slowness.
"""

from __future__ import annotations

import multiprocessing
import random
import resource
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pygit2

from bench.fixtures import fields_for
from gitmem.format.layout import memory_path


@dataclass(frozen=True)
class WriterResult:
    ids: list[str]
    errors: list[str]
    start: float
    end: float
    cpu: float
    """CPU seconds (user + system) this writer spent in the round."""
    lead_cpu: float = 0.0
    """Of which leading group commits (the serial part: gitmem.git.groupcommit.Stats)."""
    sys_cpu: float = 0.0
    """Of which system time (the kernel's: file creations, renames, locks)."""
    packing_cpu: float = 0.0
    """CPU seconds of the packing helpers this writer started in the round (their git
    included), counted once reaped: they run detached, so ``cpu`` leaves them out."""


@dataclass(frozen=True)
class RoundResult:
    writers: int
    acknowledged: list[str]
    """Every id a writer got back, warm-up creates included (all are checked for loss)."""
    timed: int
    """Creates inside the timed span."""
    errors: list[str]
    seconds: float
    cpu_seconds: float
    """CPU time of all writers in the round: above one writer's per-commit share, it is
    work thrown away by lost compare-and-swap races and retries."""
    lead_seconds: float = 0.0
    """CPU time of the writers while leading group commits: what no second processor can
    share, so ``timed / lead_seconds`` bounds the rate on any machine."""
    sys_seconds: float = 0.0
    """Of ``cpu_seconds``, the system time: the file system's share of a commit."""
    packing_seconds: float = 0.0
    """CPU time of the packing helpers the writers started (not in ``cpu_seconds``)."""

    @property
    def rate(self) -> float:
        return self.timed / self.seconds if self.seconds > 0 else 0.0


def _writer(
    path: str,
    ops: int,
    rounds: int,
    seed: int,
    barrier: Barrier,
    results: Any,
    index: int,
    group: bool = True,
) -> None:
    import gitmem

    rng = random.Random(seed)
    store = gitmem.open(path)
    store.db().group_commit = group  # False: compare-and-swap alone, as before group commit
    warm = fields_for(-1, rng)
    warm_ids: list[str] = []
    warm_errors: list[str] = []
    try:
        warm_ids.append(store.create(warm.body, **warm.create_kwargs()).id)
    except Exception as exc:
        warm_errors.append(f"warm-up: {type(exc).__name__}: {exc}")
    contents = [[fields_for(i, rng) for i in range(ops)] for _ in range(rounds)]
    for number, batch in enumerate(contents):
        # Round 0 reports the warm-up create too, so it is checked for loss (not timed).
        ids: list[str] = list(warm_ids) if number == 0 else []
        errors: list[str] = list(warm_errors) if number == 0 else []
        barrier.wait()
        queue = store.db()._queue
        lead_start = queue.stats.lead_cpu if queue is not None else 0.0
        cpu_start, sys_start = _cpu()
        packing_start = _children_cpu()
        start = time.perf_counter()
        for fields in batch:
            try:
                ids.append(store.create(fields.body, **fields.create_kwargs()).id)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        end = time.perf_counter()
        cpu_end, sys_end = _cpu()
        cpu, sys_cpu = cpu_end - cpu_start, sys_end - sys_start
        helper = store.db().autopack._helper
        if helper is not None:
            helper.wait()  # reaped, so its CPU (and its git's) joins RUSAGE_CHILDREN
        packing = _children_cpu() - packing_start
        queue = store.db()._queue
        lead = (queue.stats.lead_cpu - lead_start) if queue is not None else 0.0
        timed = len(ids) - (len(warm_ids) if number == 0 else 0)
        result = WriterResult(ids, errors, start, end, cpu, lead, sys_cpu, packing)
        results.put((number, result, timed))


def _children_cpu() -> float:
    """CPU seconds of this process's reaped children: the packing helpers it started."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _cpu() -> tuple[float, float]:
    """This process's CPU seconds so far: all (user + system), and system alone."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime, usage.ru_stime


def run_rounds(
    path: Path, writers: int, ops: int, rounds: int, seed: int, *, group: bool = True
) -> list[RoundResult]:
    """``rounds`` timed rounds of ``writers`` processes doing ``ops`` creates each.

    The processes are started once (interpreter start-up and imports stay out of every
    round) and wait at a barrier before each round, so all writers start together.
    """
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(writers)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_writer,
            args=(str(path), ops, rounds, seed * 1000 + i, barrier, results, i, group),
        )
        for i in range(writers)
    ]
    for proc in procs:
        proc.start()
    collected: list[tuple[int, WriterResult, int]] = [
        results.get(timeout=600) for _ in range(writers * rounds)
    ]
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"a writer process exited with {proc.exitcode}")
    out: list[RoundResult] = []
    for number in range(rounds):
        mine = [(result, timed) for n, result, timed in collected if n == number]
        out.append(
            RoundResult(
                writers,
                [mid for result, _ in mine for mid in result.ids],
                sum(timed for _, timed in mine),
                [err for result, _ in mine for err in result.errors],
                max(r.end for r, _ in mine) - min(r.start for r, _ in mine),
                sum(r.cpu for r, _ in mine),
                sum(r.lead_cpu for r, _ in mine),
                sum(r.sys_cpu for r, _ in mine),
                sum(r.packing_cpu for r, _ in mine),
            )
        )
    return out


def lost_writes(path: Path, ids: list[str]) -> list[str]:
    """Acknowledged ids whose file is not in the branch tip, read with pygit2 directly."""
    repo = pygit2.Repository(str(path))
    tree = repo.revparse_single("refs/heads/main").peel(pygit2.Tree)
    missing: list[str] = []
    for memory_id in ids:
        try:
            tree[memory_path(memory_id)]
        except KeyError:
            missing.append(memory_id)
    return missing
