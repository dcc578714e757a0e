"""The write floors, each beside its baseline in the same run: ``python -m bench.writes``.

- single create into a bare store of 20k memories: >= 250/s and >= 10x ``git add`` +
  ``git commit`` of one file in a checkout of the same store;
- 5,000 single creates into a new bare store: on disk (``du``, the derived index left out)
  <= 4x the bytes of the memory files, and <= 7,000 loose objects at the end;
- 8 writer processes on one bare store: 0 acknowledged writes lost, >= 0.6x the commits/s
  of one writer.

Each figure is the median of ``--repeat`` runs, alternating with its baseline. Writers are
fresh interpreters (``spawn``) that wait at a barrier, so all start together; every id a
writer was given back is then looked up in the branch tip with pygit2.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any

import pygit2

import gitmem
from bench.fixtures import fields_for, memory_text, new_memory_id, populate
from bench.harness import Timed, git, measure_alternating
from gitmem.base import paths
from gitmem.format.layout import memory_path
from gitmem.git import maintenance

# -- writer processes ------------------------------------------------------------------------


@dataclass(frozen=True)
class RoundResult:
    writers: int
    acknowledged: list[str]
    """Every id a writer got back, warm-up creates included (all are checked for loss)."""
    timed: int
    errors: list[str]
    seconds: float
    """From the first writer's start to the last one's end."""
    cpu_seconds: float
    """CPU time of all writers together."""

    @property
    def rate(self) -> float:
        return self.timed / self.seconds if self.seconds > 0 else 0.0


def _writer(path: str, ops: int, rounds: int, seed: int, barrier: Barrier, results: Any) -> None:
    rng = random.Random(seed)
    store = gitmem.open(path)
    warm: list[str] = []
    errors: list[str] = []
    try:  # imports and the first open stay out of the timing
        warm.append(store.create(fields_for(-1, rng).body).id)
    except Exception as exc:
        errors.append(f"warm-up: {type(exc).__name__}: {exc}")
    for number in range(rounds):
        batch = [fields_for(i, rng) for i in range(ops)]
        ids = list(warm) if number == 0 else []
        barrier.wait()
        cpu = time.process_time()
        start = time.perf_counter()
        for fields in batch:
            try:
                ids.append(store.create(fields.body, **fields.create_kwargs()).id)
            except Exception as exc:
                errors.append(f"{type(exc).__name__}: {exc}")
        end = time.perf_counter()
        timed = len(ids) - (len(warm) if number == 0 else 0)
        results.put((number, ids, errors, start, end, time.process_time() - cpu, timed))
        errors = []


def run_rounds(path: Path, writers: int, ops: int, rounds: int, seed: int) -> list[RoundResult]:
    """``rounds`` timed rounds of ``writers`` processes making ``ops`` creates each."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(writers)
    results = ctx.Queue()
    procs = [
        ctx.Process(
            target=_writer, args=(str(path), ops, rounds, seed * 1000 + i, barrier, results)
        )
        for i in range(writers)
    ]
    for proc in procs:
        proc.start()
    collected = [results.get(timeout=900) for _ in range(writers * rounds)]
    for proc in procs:
        proc.join()
        if proc.exitcode != 0:
            raise RuntimeError(f"a writer process exited with {proc.exitcode}")
    out = []
    for number in range(rounds):
        mine = [r for r in collected if r[0] == number]
        out.append(
            RoundResult(
                writers,
                [i for r in mine for i in r[1]],
                sum(r[6] for r in mine),
                [e for r in mine for e in r[2]],
                max(r[4] for r in mine) - min(r[3] for r in mine),
                sum(r[5] for r in mine),
            )
        )
    return out


def lost_writes(path: Path, ids: list[str]) -> list[str]:
    """Acknowledged ids whose file is not in the branch tip, read with pygit2 directly."""
    repo = pygit2.Repository(str(path))
    tree = repo.revparse_single("refs/heads/main").peel(pygit2.Tree)
    missing = []
    for memory_id in ids:
        try:
            tree[memory_path(memory_id)]
        except KeyError:
            missing.append(memory_id)
    return missing


# -- the floors ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Figure:
    name: str
    value: float
    unit: str
    baseline: str
    base_value: float | None
    floor: str
    met: bool
    note: str = ""

    def line(self) -> str:
        ratio = f"{self.value / self.base_value:.2f}x" if self.base_value else ""
        base = f"{self.baseline} {self.base_value:,.1f}" if self.base_value is not None else ""
        return (
            f"| {self.name} | {self.value:,.1f} {self.unit} | {base} | {ratio} | {self.floor} | "
            f"{'yes' if self.met else 'NO'} | {self.note} |"
        )


def single_creates(root: Path, size: int, ops: int, repeat: int, rng: random.Random) -> Figure:
    """gitmem's single create beside ``git add`` + ``git commit`` of one file, same files."""
    path = root / "store.git"
    print(f"importing {size:,} memories, packing, cloning a checkout...", flush=True)
    populate(path, size, bare=True, rng=rng)
    maintenance.gc(path)  # a store that has lived, not one import's loose objects
    checkout = root / "checkout"
    git(root, "clone", "-q", "--branch", "main", str(path), str(checkout))
    store = gitmem.open(path)
    count = 3 + repeat * ops
    pool = [fields_for(size + i, rng) for i in range(count)]
    rendered = []
    for fields in pool:
        memory_id = new_memory_id(rng)
        text = memory_text(memory_id, fields, created=gitmem.SystemClock().now())
        rendered.append((memory_path(memory_id), text.encode(), f"create: {fields.title}"))
        (checkout / rendered[-1][0]).parent.mkdir(parents=True, exist_ok=True)

    def create(i: int) -> None:
        store.create(pool[i].body, **pool[i].create_kwargs())

    def git_commit(i: int) -> None:
        rel, data, message = rendered[i]
        (checkout / rel).write_bytes(data)
        git(checkout, "add", "--", rel)
        git(checkout, "commit", "-q", "--no-verify", "-m", message)

    print(f"single creates: {repeat} runs of {ops} each, alternating with git", flush=True)
    ours, theirs = measure_alternating([Timed(create, ops, 3), Timed(git_commit, ops, 3)], repeat)
    return Figure(
        f"single create, bare store of {size:,}",
        ours.rate,
        "/s",
        "git add+commit",
        theirs.rate,
        ">= 250/s, >= 10x",
        ours.rate >= 250 and ours.rate >= 10 * theirs.rate,
        f"p50 {ours.p50 * 1e3:.2f} ms; runs {', '.join(f'{r:.0f}' for r in ours.rates)}",
    )


def _on_disk(gitdir: Path) -> tuple[int, int]:
    """(bytes allocated, as ``du`` counts them, and loose objects) of a git directory, the
    derived state left out; files a repack removes during the walk are skipped."""
    total = loose = 0
    state = paths.state_dir(gitdir)
    for root, dirs, files in os.walk(gitdir):
        if Path(root) == state:
            dirs.clear()
            continue
        in_fanout = Path(root).parent == gitdir / "objects" and len(Path(root).name) == 2
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512  # noqa: PTH118
            except FileNotFoundError:
                continue
            loose += in_fanout
    return total, loose


def store_size(root: Path, creates: int, rng: random.Random) -> list[Figure]:
    """``creates`` single creates into a new bare store, packing itself as it ships."""
    store = gitmem.init(root / "new.git", bare=True)
    gitdir = store.db().gitdir
    repo = pygit2.Repository(str(gitdir))
    raw = 0
    worst = (0.0, 0)
    print(f"{creates:,} single creates into a new bare store", flush=True)
    started = time.perf_counter()
    for i in range(creates):
        fields = fields_for(i, rng)
        memory = store.create(fields.body, **fields.create_kwargs())
        raw += repo.revparse_single(f"main:{memory.path}").size
        if (i + 1) % 100 == 0 and i + 1 >= creates // 2:
            disk, _ = _on_disk(gitdir)
            worst = max(worst, (disk / raw, i + 1))
    seconds = time.perf_counter() - started
    disk, loose = _on_disk(gitdir)
    with maintenance.exclusive(gitdir):
        settled, settled_loose = _on_disk(gitdir)
    packs = len(list((gitdir / "objects" / "pack").glob("*.pack")))
    gc_auto, pack_limit = maintenance.thresholds(repo.config)
    return [
        Figure(
            f"{creates:,} creates: on disk at the end",
            disk / 1e6,
            "MB",
            "raw MB",
            raw / 1e6,
            "<= 4x raw",
            disk <= 4 * raw,
            f"worst {worst[0]:.2f}x (at {worst[1]:,}, sampled every 100 from {creates // 2:,}); "
            f"packing settled {settled / raw:.2f}x, {settled_loose:,} loose, {packs} packs; "
            f"gc.auto {gc_auto}, gc.autoPackLimit {pack_limit}; {creates / seconds:.0f} creates/s",
        ),
        Figure(
            f"{creates:,} creates: loose objects at the end",
            loose,
            "",
            "",
            None,
            "<= 7,000",
            loose <= 7000,
        ),
    ]


def writers(path: Path, count: int, ops: int, repeat: int) -> Figure:
    """Rounds alternate: one writer, then ``count`` writers, on the same bare store."""
    rates: dict[int, list[float]] = {1: [], count: []}
    acked: list[str] = []
    errors: list[str] = []
    for round_ in range(repeat):
        for n in (1, count):
            print(f"round {round_ + 1}: {n} writer(s) x {ops} creates", flush=True)
            (result,) = run_rounds(path, n, ops, 1, seed=round_ * 100 + n)
            rates[n].append(result.rate)
            acked += result.acknowledged
            errors += result.errors
    lost = lost_writes(path, acked)
    one, many = statistics.median(rates[1]), statistics.median(rates[count])
    return Figure(
        f"{count} writer processes",
        many,
        "commits/s",
        "1 writer",
        one,
        "0 lost, >= 0.6x",
        not lost and many >= 0.6 * one,
        f"{len(lost)} lost of {len(acked)} acknowledged, {len(errors)} errors"
        + (f" ({errors[0][:80]})" if errors else ""),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.writes", description=__doc__)
    parser.add_argument("--size", type=int, default=20_000, help="memories in the store")
    parser.add_argument("--creates", type=int, default=5_000, help="creates into a new store")
    parser.add_argument("--ops", type=int, default=200, help="creates per timed run")
    parser.add_argument("--writer-ops", type=int, default=100, help="creates per writer")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--seed", type=int, default=20261122)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    load = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="gitmem-writes-"))
    try:
        figures = [single_creates(root, args.size, args.ops, args.repeat, rng)]
        figures += store_size(root, args.creates, rng)
        figures.append(writers(root / "store.git", 8, args.writer_ops, args.repeat))
    finally:
        for lock in root.glob(f"*/{paths.STATE_DIR}/{paths.GC_LOCK}"):
            with maintenance.exclusive(lock.parent.parent):
                pass
        shutil.rmtree(root, ignore_errors=True)
    after = os.getloadavg()
    print(f"\nload average {load[0]:.1f} before, {after[0]:.1f} after; {os.cpu_count()} CPUs")
    print("| figure | gitmem | baseline | ratio | floor | met | note |")
    print("|---|---|---|---|---|---|---|")
    for figure in figures:
        print(figure.line())
    return 0 if all(f.met for f in figures) else 1


if __name__ == "__main__":
    sys.exit(main())
