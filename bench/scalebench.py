"""Scale scenarios (issue 17): a store packing itself as it grows, beside ``git gc``.

``autopack``: N single creates into a fresh bare store with automatic packing as it
ships (git's ``gc.auto`` rules, gitmem's default threshold). Every ``N/40`` creates it
samples the repository's apparent size (``du --apparent-size`` of the git directory
without the derived index ``<gitdir>/gitmem/``), the loose objects (counted, not
estimated) and the packs, beside "raw": the bytes of the memory files in the tip; a
watcher process (:mod:`bench.sizewatch`) takes the same every 0.25 s, until packing has
settled after the last create, and the worst moment is the worst either saw. At
the end, the same store after ``git gc`` is the baseline. N: 60 (``--tiny``), 2,000
(``--quick``), 10,000 (full), or ``GITMEM_BENCH_AUTOPACK_CREATES``.
"""

from __future__ import annotations

import itertools
import os
import random
import resource
import time

import gitmem
from bench.fixtures import Context, fields_for
from bench.harness import Row, Stopwatch, git, log, median, percentile, scenario, size_label
from bench.sizewatch import Sample, Watch, apparent_size
from gitmem.git import autopack

CREATES = {"tiny": 60, "quick": 2_000, "full": 10_000}
LOOSE_LIMIT = 6_700
"""git's default ``gc.auto``: the issue's bound on loose objects between packing steps."""
SIZE_TARGET = 3.0
WATCH_INTERVAL = 0.25
"""Seconds between the watcher's looks at the store (:mod:`bench.sizewatch`): a roll-up's
copy lives 1-4 s at 100k memories."""


def _longest_over(watched: list[Sample], limit: int) -> float:
    """The longest stretch, in seconds, of the watcher's samples with more than ``limit``
    loose objects (from the first such sample to the first one back under it)."""
    longest = 0.0
    since: float | None = None
    for sample in watched:
        if sample.loose > limit:
            since = sample.at if since is None else since
        elif since is not None:
            longest = max(longest, sample.at - since)
            since = None
    if since is not None and watched:
        longest = max(longest, watched[-1].at - since)
    return longest


def _creates(ctx: Context) -> int:
    override = os.environ.get("GITMEM_BENCH_AUTOPACK_CREATES")
    return int(override) if override else CREATES.get(ctx.config.mode, 10_000)


@scenario("autopack", "automatic packing during N single creates, beside git gc")
def autopack_size(ctx: Context) -> list[Row]:
    count = _creates(ctx)
    path = ctx.new_dir("autopack") / "store.git"
    store = gitmem.init(path, bare=True)
    db = store.db()
    rng = random.Random(ctx.config.seed)
    pool = [fields_for(i, rng) for i in range(count)]
    step = max(10, count // 40)
    samples: list[Sample] = []
    latencies: list[float] = []
    raw = 0
    log(f"{count:,} single creates into a fresh bare store, packing itself")
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    writer_cpu = 0.0
    watcher = Watch(db.gitdir, ctx.new_dir("autopack-watch"), WATCH_INTERVAL)
    with watcher:
        for i, fields in enumerate(pool):
            t0, c0 = time.perf_counter(), time.thread_time()
            memory = store.create(fields.body, **fields.create_kwargs())
            writer_cpu += time.thread_time() - c0
            latencies.append(time.perf_counter() - t0)
            tip = db.tip()
            assert tip is not None and memory.path is not None
            raw += len(db.repo[tip.tree[memory.path].id].read_raw())
            watcher.update(i + 1, raw)
            if (i + 1) % step == 0 or i + 1 == count:
                apparent, loose, packs = apparent_size(db.gitdir)
                samples.append(Sample(i + 1, apparent, raw, loose, packs))
        elapsed = time.perf_counter() - started
        if db.autopack.launched:
            autopack.wait_idle(db.gitdir, db.autopack.last_launch, timeout=600)
        helper = db.autopack._helper
        if helper is not None:
            helper.wait()  # reaped (the earlier ones were as they were replaced): CPU below
        settled_at = time.monotonic()
        # The watcher's own CPU is not the helpers': taken before it is reaped.
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        watched = watcher.stop()
    packing_ms = (
        (after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime) / count * 1e3
    )
    apparent, loose, packs = apparent_size(db.gitdir)
    settled = Sample(count, apparent, raw, loose, packs)
    with Stopwatch() as watch:
        git(path, "gc", "--quiet")
    gc_apparent, gc_loose, gc_packs = apparent_size(db.gitdir)
    # The ratio early on says little (a store of 50 memories is mostly git's own files):
    # the worst is taken once the store holds a tenth of the run.
    later = [s for s in samples if s.creates >= count // 10] or samples
    stepped = max(later, key=lambda s: s.ratio)
    # Every moment the watcher saw, the writer's samples among them.
    moments = [s for s in watched if s.creates >= count // 10] + later
    worst = max(moments, key=lambda s: s.ratio)
    over = [s.creates for s in samples if s.loose > LOOSE_LIMIT]
    runs_over = sum(1 for a, b in itertools.pairwise(over) if b - a == step)
    longest = _longest_over(watched, LOOSE_LIMIT)
    label = f"{size_label(count)} single creates"
    limit = autopack.read_thresholds(db.repo.config)
    # (Thresholds before the count grew with the packs had no loose_limit: a checkout of
    # that main runs this scenario as the baseline.)
    low = limit.loose_limit(0) if hasattr(limit, "loose_limit") else limit.auto
    cadence = (
        f"gc.auto {low}-{limit.auto}, {db.autopack.launched} packing helpers "
        f"started, their CPU (with their git's) {packing_ms:.2f} ms a create"
    )
    rate = count / elapsed
    return [
        Row(
            "on disk while packing itself: worst moment",
            label,
            "MB",
            worst.apparent / 1e6,
            "raw bytes of the memory files",
            worst.raw / 1e6,
            compare="size",
            runs=1,
            target=f"≤ {SIZE_TARGET:.0f}x raw at every moment",
            met=worst.ratio <= SIZE_TARGET,
            note=f"at {worst.creates:,} creates{' (settling)' if worst.at > settled_at else ''} "
            f"({worst.loose:,} loose objects, {worst.packs} packs); {len(moments):,} moments "
            f"from {later[0].creates:,} creates on (every {WATCH_INTERVAL} s and every "
            f"{step:,} creates, where the worst was {stepped.ratio:.2f}x); {cadence}",
        ),
        Row(
            "on disk after the last create, packing settled",
            label,
            "MB",
            settled.apparent / 1e6,
            "raw bytes of the memory files",
            raw / 1e6,
            compare="size",
            runs=1,
            note=f"{settled.loose:,} loose objects, {settled.packs} packs",
        ),
        Row(
            "on disk after `git gc` (baseline, same store)",
            label,
            "MB",
            gc_apparent / 1e6,
            "raw bytes of the memory files",
            raw / 1e6,
            compare="size",
            runs=1,
            note=f"git gc took {watch.seconds:.1f} s; {gc_loose} loose, {gc_packs} packs",
        ),
        Row(
            "loose objects at the worst sample",
            label,
            "objects",
            float(max(s.loose for s in samples)),
            compare="none",
            runs=1,
            target=f"never > {LOOSE_LIMIT:,} for longer than one packing step",
            met=runs_over == 0,
            note=f"{len(over)} of {len(samples)} samples over {LOOSE_LIMIT:,}, "
            f"{runs_over} of them in a row; watched every {WATCH_INTERVAL} s: over "
            f"{LOOSE_LIMIT:,} for {longest:.1f} s at most",
        ),
        Row(
            "single create while the store packs itself",
            label,
            "commits/s",
            rate,
            compare="none",
            runs=1,
            note=f"p50 {1e3 * median(latencies):.2f} ms, p99 "
            f"{1e3 * percentile(latencies, 99):.2f} ms, max {1e3 * max(latencies):.1f} ms "
            f"per create (sampling excluded); the writer's CPU {1e3 * writer_cpu / count:.2f} "
            "ms a create (user + system, its packing helpers apart)",
        ),
    ]


# -- writers that help each other ----------------------------------------------------------------


@scenario("group-commit", "8 writer processes with group commit, beside 1 writer and CAS alone")
def group_commit(ctx: Context) -> list[Row]:
    """Rounds alternate: 1 writer, 8 writers with group commit, 8 writers with compare-and-swap
    alone (``GitDB.group_commit = False``: every loser re-runs its plan), on one bare store;
    then the bare-pygit2 floor of one writer in this process. Every acknowledged id is
    checked in the branch tip."""
    from bench.harness import measure_alternating
    from bench.scenarios import _pygit2_floor
    from bench.writers import lost_writes, run_rounds

    config = ctx.config
    populated = ctx.bare_store(config.writers_size)
    ops = max(config.writer_ops, 10)
    rates: dict[str, list[float]] = {"1": [], "8 group": [], "8 cas": []}
    cpu: dict[str, list[float]] = {k: [] for k in rates}
    lead: dict[str, list[float]] = {k: [] for k in rates}
    system: dict[str, list[float]] = {k: [] for k in rates}
    packing: dict[str, list[float]] = {k: [] for k in rates}
    acked: list[str] = []
    errors = 0
    first_error = ""
    for round_ in range(config.repeat):
        for key, writers, group in (("1", 1, True), ("8 group", 8, True), ("8 cas", 8, False)):
            log(f"round {round_ + 1}: {key} writer(s) x {ops} creates")
            (result,) = run_rounds(
                populated.path, writers, ops, 1, config.seed + round_ * 10 + writers, group=group
            )
            rates[key].append(result.rate)
            cpu[key].append(1e3 * result.cpu_seconds / max(1, result.timed))
            lead[key].append(1e3 * result.lead_seconds / max(1, result.timed))
            system[key].append(1e3 * result.sys_seconds / max(1, result.timed))
            packing[key].append(1e3 * result.packing_seconds / max(1, result.timed))
            acked += result.acknowledged
            errors += len(result.errors)
            if result.errors and not first_error:
                first_error = f" (first, {key}: {result.errors[0][:100]})"
    lost = lost_writes(populated.path, acked)
    (floor,) = measure_alternating([_pygit2_floor(ctx, populated.path)], config.repeat)
    one, grouped, cas = (median(rates[k]) for k in ("1", "8 group", "8 cas"))
    label = f"{size_label(populated.size)} memories"

    def cpu_note(key: str) -> str:
        note = (
            f"{median(cpu[key]):.1f} ms of CPU per commit ({median(system[key]):.1f} system), "
            "all writers together"
        )
        if key != "8 cas":
            # The leader's part is serial: 1 / it bounds the rate on any number of processors.
            note += f", {median(lead[key]):.2f} ms of it leading"
        # The packing helpers run detached: their CPU is beside the writers', not in it.
        return note + f"; packing helpers {median(packing[key]):.2f} ms more per commit"

    return [
        Row(
            "8 writers together, group commit",
            label,
            "commits/s",
            grouped,
            "1 writer",
            one,
            runs=config.repeat,
            target="≥ 1.5x one writer; 0 lost",
            met=grouped >= 1.5 * one and not lost,
            note=f"{len(lost)} lost of {len(acked)} acknowledged (all rounds); {errors} errors"
            f"{first_error}; " + cpu_note("8 group"),
        ),
        Row(
            "8 writers together, compare-and-swap alone (before)",
            label,
            "commits/s",
            cas,
            "1 writer",
            one,
            runs=config.repeat,
            note=cpu_note("8 cas"),
        ),
        Row(
            "1 writer",
            label,
            "commits/s",
            one,
            "pygit2 floor: blob + the trees on its path + commit + ref, one process",
            floor.rate,
            runs=config.repeat,
            note=cpu_note("1") + f"; floor {floor.cpu_rate:,.0f}/s of CPU time",
        ),
    ]
