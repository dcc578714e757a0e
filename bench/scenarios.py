"""The scenarios of issue 3, each beside the tool people would otherwise use.

Scenarios run in registration order, which matters: stores are shared, creates add
memories, and ``git gc`` (store size) repacks, so read-only scenarios come before the
writers, and maintenance comes last.

Hooks for work not done yet are registered here too, with a ``requires`` check that tells
the runner why they cannot run; they turn on when their feature lands:

* ``search``: written against the issue's ``Store.search(query, mode=...)`` signature;
  runs as soon as ``Store.search`` exists.
* ``index-catchup`` and ``index-rebuild``: fill in the function bodies once the index
  module has its API (their docstrings say what to measure).
"""

from __future__ import annotations

import random
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import frontmatter
import pygit2

import gitmem
from bench.fixtures import (
    Context,
    Fields,
    Populated,
    append_commits,
    disk_usage,
    fields_for,
    iter_blobs,
    memory_text,
    new_memory_id,
    populate,
    write_import_stream,
)
from bench.harness import (
    OpStats,
    Row,
    Stopwatch,
    Timed,
    git,
    log,
    measure_alternating,
    measure_budget,
    median,
    ms,
    scenario,
    size_label,
)
from bench.writers import lost_writes, run_rounds
from gitmem.format.layout import memory_path
from gitmem.git import autopack

TARGET_MEMORIES = 100_000
TARGET_WORKTREE = 10_000
TARGET_COMMITS = 100_000
TARGET_WRITERS = 8


def _at(size: int, target_size: int, option: str) -> str:
    """A note when a target stated for one size is checked at another."""
    if size == target_size:
        return ""
    return f"the issue's size is {size_label(target_size)} (set it with {option})"


def _join(*notes: str) -> str:
    return "; ".join(n for n in notes if n)


# -- creating one memory ---------------------------------------------------------------------


def _pool(ctx: Context, count: int) -> list[Fields]:
    rng = random.Random(ctx.rng.random())
    return [fields_for(i, rng) for i in range(count)]


def _gitmem_creates(ctx: Context, path: Path) -> Timed:
    config = ctx.config
    store = gitmem.open(path)
    pool = _pool(ctx, config.warmup + config.repeat * config.ops)

    def op(i: int) -> None:
        fields = pool[i]
        store.create(fields.body, **fields.create_kwargs())

    return Timed(op, config.ops, config.warmup)


def _rendered(ctx: Context, count: int) -> list[tuple[str, bytes, str]]:
    """(path, file bytes, commit message) of new memories, rendered before any timing."""
    rng = random.Random(ctx.rng.random())
    out: list[tuple[str, bytes, str]] = []
    for fields in _pool(ctx, count):
        memory_id = new_memory_id(rng)
        text = memory_text(memory_id, fields, created=gitmem.SystemClock().now())
        message = f"create: {fields.title}\n\nGitmem-Op: create\nGitmem-Id: {memory_id}\n"
        out.append((memory_path(memory_id), text.encode(), message))
    return out


def _git_creates(ctx: Context, checkout: Path) -> Timed:
    """``git add`` + ``git commit`` of one new file per memory, in a checkout."""
    config = ctx.config
    items = _rendered(ctx, config.warmup + config.repeat * config.git_ops)
    for rel, _, _ in items:
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)

    def op(i: int) -> None:
        rel, data, message = items[i]
        (checkout / rel).write_bytes(data)
        git(checkout, "add", "--", rel)
        git(checkout, "commit", "-q", "--no-verify", "-m", message)

    return Timed(op, config.git_ops, config.warmup)


def _plain_writes(ctx: Context, checkout: Path) -> tuple[Timed, list[Path]]:
    """The same files written into the checkout's tree, without git (remove them after)."""
    config = ctx.config
    items = _rendered(ctx, config.warmup + config.repeat * config.ops)
    paths = [checkout / rel for rel, _, _ in items]
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
    names = [str(path) for path in paths]

    def op(i: int) -> None:
        with open(names[i], "wb") as fh:
            fh.write(items[i][1])

    return Timed(op, config.ops, config.warmup), paths


def _pygit2_floor(ctx: Context, path: Path) -> Timed:
    """The same commit made with bare pygit2 calls: a blob, the trees along its path (three
    in the legacy layout, six in format 4's), the commit, the ref update. No encoding,
    validation or retry: what the write path's git work costs, so the distance to gitmem's
    rate is gitmem's own Python."""
    config = ctx.config
    repo = pygit2.Repository(str(path))
    items = _rendered(ctx, config.warmup + config.repeat * config.ops)
    signature = pygit2.Signature("bench", "bench@bench.invalid")

    def op(i: int) -> None:
        rel, data, message = items[i]
        pygit2_create(repo, rel, data, message, signature)

    return Timed(op, config.ops, config.warmup)


def pygit2_create(
    repo: pygit2.Repository, rel: str, data: bytes, message: str, signature: pygit2.Signature
) -> None:
    """One create with bare pygit2 calls (the floor): the blob, the trees along ``rel``, the
    commit on main's tip, main moved."""
    ref = repo.lookup_reference("refs/heads/main")
    parent = repo[ref.target].peel(pygit2.Commit)
    commit = pygit2_commit(repo, parent, rel, data, message, signature)
    ref.set_target(commit, "bench: pygit2 floor")


def pygit2_commit(
    repo: pygit2.Repository,
    parent: pygit2.Commit,
    rel: str,
    data: bytes,
    message: str,
    signature: pygit2.Signature,
) -> pygit2.Oid:
    """The objects of :func:`pygit2_create` on ``parent`` (blob, trees, commit), no branch moved."""
    parts = rel.split("/")
    trees: list[pygit2.Tree | None] = [parent.tree]
    for part in parts[:-1]:
        here = trees[-1]
        trees.append(repo[here[part].id].peel(pygit2.Tree) if here and part in here else None)
    child, mode = repo.create_blob(data), pygit2.enums.FileMode.BLOB
    for depth in range(len(parts) - 1, -1, -1):
        existing = trees[depth]
        builder = repo.TreeBuilder(existing) if existing is not None else repo.TreeBuilder()
        builder.insert(parts[depth], child, mode)
        child, mode = builder.write(), pygit2.enums.FileMode.TREE
    commit: pygit2.Oid = repo.create_commit(None, signature, signature, message, child, [parent.id])
    return commit


def _create_rows(
    ctx: Context,
    kind: str,
    populated: Populated,
    target: str,
    met: Callable[[float], bool],
    target_size: int,
    option: str,
) -> list[Row]:
    size = populated.size
    checkout = ctx.checkout(size)
    log(f"create into a {kind} store of {size:,} memories, beside its baselines")
    plain_timed, written = _plain_writes(ctx, checkout)
    items = [_gitmem_creates(ctx, populated.path), _git_creates(ctx, checkout), plain_timed]
    if populated.bare:  # raw commits would leave a work tree behind its branch
        items.append(_pygit2_floor(ctx, populated.path))
    try:
        stats, git_stats, plain, *floor = measure_alternating(items, ctx.config.repeat)
    finally:
        for path in written:
            path.unlink(missing_ok=True)
    label = f"{size_label(size)} memories"
    latency = (
        f"p50 {ms(stats.p50):.2f} ms, p99 {ms(stats.p99):.2f} ms per create; "
        f"{stats.cpu_rate:,.0f}/s of CPU time"
    )
    return [
        Row(
            f"create one memory, {kind} store",
            label,
            "commits/s",
            stats.rate,
            "`git add` + `git commit` per file",
            git_stats.rate,
            runs=stats.runs,
            target=target,
            met=met(stats.rate),
            note=_join(latency, _at(size, target_size, option)),
        ),
        Row(
            f"create one memory, {kind} store",
            label,
            "commits/s",
            stats.rate,
            "plain file write, no git",
            plain.rate,
            runs=stats.runs,
        ),
    ] + [
        Row(
            f"create one memory, {kind} store",
            label,
            "commits/s",
            stats.rate,
            "pygit2 floor: blob + the trees on its path + commit + ref, no encoding",
            raw.rate,
            runs=stats.runs,
            note=f"floor: {raw.cpu_rate:,.0f}/s of CPU time",
        )
        for raw in floor
    ]


@scenario("create-bare", "single-memory create into a bare store")
def create_bare(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    rates: dict[int, float] = {}
    for size in ctx.config.sizes:
        populated = ctx.bare_store(size)
        new = _create_rows(
            ctx,
            "bare",
            populated,
            "≥ 1,000/s at 100k",
            lambda r: r >= 1000,
            TARGET_MEMORIES,
            "--sizes",
        )
        rates[size] = new[0].value or 0.0
        rows.extend(new)
    if len(rates) > 1:
        small, large = min(rates), max(rates)
        kept = 100.0 * rates[large] / rates[small]
        rows.append(
            Row(
                "create one memory, bare store: rate kept as the store grows",
                f"{size_label(large)} vs {size_label(small)}",
                f"% of the {size_label(small)} rate",
                kept,
                compare="none",
                runs=ctx.config.repeat,
                target="≥ 80% (100k vs 1k)",
                met=kept >= 80.0,
            )
        )
    return rows


@scenario("create-worktree", "single-memory create into a store with a work tree")
def create_worktree(ctx: Context) -> list[Row]:
    rows: list[Row] = []
    for size in ctx.config.worktree_sizes:
        populated = ctx.worktree_store(size)
        rows.extend(
            _create_rows(
                ctx,
                "work-tree",
                populated,
                "≥ 100/s at 10k",
                lambda r: r >= 100,
                TARGET_WORKTREE,
                "--worktree-sizes",
            )
        )
    return rows


# -- durable writes ----------------------------------------------------------------------------


def _fsync(on: bool) -> None:
    """libgit2's fsync of objects and refs is process-wide: set it for the op about to run,
    so durable and plain creates can alternate in one process."""
    settings: Any = pygit2.settings
    if callable(settings.enable_fsync_gitdir):
        settings.enable_fsync_gitdir(on)
    else:
        settings.enable_fsync_gitdir = on


def _durable_creates(ctx: Context, path: Path, durable: bool) -> Timed:
    config = ctx.config
    store = gitmem.open(path, durable=durable)
    pool = _pool(ctx, config.warmup + config.repeat * config.ops)

    def op(i: int) -> None:
        _fsync(durable)
        fields = pool[i]
        store.create(fields.body, **fields.create_kwargs())

    return Timed(op, config.ops, config.warmup)


@scenario("durable-create", "create with durable=True (fsync) beside the default")
def durable_create(ctx: Context) -> list[Row]:
    """The cost of ``durable=True``: objects, refs, the work-tree file and git's index are
    fsynced before a create returns. Both variants write to fresh small stores, alternating."""
    rows: list[Row] = []
    try:
        for bare in (True, False):
            kind = "bare" if bare else "work-tree"
            directory = ctx.new_dir(f"durable-{kind}")
            paths = [directory / name for name in ("plain", "durable")]
            for path in paths:
                gitmem.init(path, bare=bare)
            log(f"create into a {kind} store with and without durable=True")
            plain, durable = measure_alternating(
                [_durable_creates(ctx, paths[0], False), _durable_creates(ctx, paths[1], True)],
                ctx.config.repeat,
            )
            rows.append(
                Row(
                    f"create one memory, {kind} store, durable=True",
                    "new store",
                    "commits/s",
                    durable.rate,
                    "the same create without fsync (durable=False)",
                    plain.rate,
                    runs=durable.runs,
                    note=(
                        f"p50 {ms(durable.p50):.2f} ms vs {ms(plain.p50):.2f} ms; fsync cost "
                        "depends on the disk (tmpfs: none)"
                    ),
                )
            )
    finally:
        _fsync(False)
    return rows


# -- bulk import -----------------------------------------------------------------------------


@scenario("bulk-import", "bulk import in one transaction vs git fast-import")
def bulk_import(ctx: Context) -> list[Row]:
    config = ctx.config
    rows: list[Row] = []
    for size in config.sizes:
        populated = ctx.bare_store(size)
        seconds = [populated.import_seconds]
        if size <= config.bulk_repeat_max:
            for _ in range(config.slow_repeat - 1):
                path = ctx.new_dir(f"reimport-{size_label(size)}") / "store.git"
                seconds.append(populate(path, size, bare=True, rng=ctx.rng).import_seconds)
        stream = ctx.new_dir(f"stream-{size_label(size)}") / "import.fast-import"
        raw = write_import_stream(populated.path, populated.commit, stream)

        timings: list[float] = []
        for _ in range(config.slow_repeat):
            target = ctx.new_dir("fast-import") / "repo.git"
            git(target.parent, "init", "-q", "--bare", str(target))
            with Stopwatch() as watch:
                git(target, "fast-import", "--quiet", "--date-format=raw", stdin_path=stream)
            timings.append(watch.seconds)
        took = median(seconds)
        runs_note = (
            f"one run: imports over {config.bulk_repeat_max:,} memories are not repeated"
            if size > config.bulk_repeat_max
            else ""
        )
        rows.append(
            Row(
                "bulk import, one `store.transaction()`",
                f"{size_label(size)} memories",
                "seconds",
                took,
                "`git fast-import` of the same files",
                median(timings),
                higher_is_better=False,
                runs=len(seconds),
                target="≤ 60 s at 100k",
                met=took <= 60.0 if size >= TARGET_MEMORIES else None,
                note=_join(
                    f"{size / took:,.0f} memories/s, {raw / 1e6:.1f} MB of files",
                    runs_note,
                ),
            )
        )
    return rows


# -- reading ---------------------------------------------------------------------------------


def _read_stats(ctx: Context, populated: Populated) -> tuple[OpStats, OpStats, int]:
    """store.read of random ids, alternating with reads of the same files from the checkout."""
    config = ctx.config
    sample = random.Random(config.seed).sample(populated.ids, min(config.reads, len(populated.ids)))
    store = gitmem.open(populated.path)
    assert populated.checkout is not None
    paths = [str(populated.checkout / memory_path(mid)) for mid in sample]

    def op(i: int) -> None:
        store.read(sample[i % len(sample)])

    def file_op(i: int) -> None:
        with open(paths[i % len(paths)], "rb") as fh:
            fh.read()

    warmup = min(50, len(sample))
    stats, baseline = measure_alternating(
        [Timed(op, len(sample), warmup), Timed(file_op, len(paths), warmup)], config.repeat
    )
    return stats, baseline, len(sample)


def _read_rows(stats: OpStats, baseline: OpStats, size: int, reads: int, when: str) -> list[Row]:
    label = f"{size_label(size)} memories"
    return [
        Row(
            f"read by id{when}",
            label,
            "p50 ms",
            ms(stats.p50),
            "read the file from a checkout",
            ms(baseline.p50),
            higher_is_better=False,
            runs=stats.runs,
            target="≤ 1 ms",
            met=ms(stats.p50) <= 1.0,
            note=_join(
                f"{reads} random ids per run; {1e3 / stats.cpu_rate:.2f} ms of CPU per read",
                _at(size, TARGET_MEMORIES, "--sizes"),
            ),
        ),
        Row(
            f"read by id{when}",
            label,
            "p99 ms",
            ms(stats.p99),
            "read the file from a checkout",
            ms(baseline.p99),
            higher_is_better=False,
            runs=stats.runs,
        ),
    ]


@scenario("read", "read by id, p50 and p99")
def read(ctx: Context) -> list[Row]:
    populated = ctx.bare_store(ctx.config.read_size)
    log(f"read by id in a store of {populated.size:,} memories")
    stats, baseline, reads = _read_stats(ctx, populated)
    return _read_rows(stats, baseline, populated.size, reads, "")


# -- the index: full rebuild, then catch-up after new commits ---------------------------------


def _indexed() -> bool:
    return _needs_index() is None


def _needs_index() -> str | None:
    if hasattr(gitmem.Store, "reindex") and hasattr(gitmem.Store, "index"):
        return None
    return "Store.index/Store.reindex do not exist yet (issue 3: the derived SQLite index)"


@scenario("index-rebuild", "index full rebuild", requires=_needs_index)
def index_rebuild(ctx: Context) -> list[Row]:
    """Rebuilds the index of the read-size store (many memories, few commits) and of the
    history store (one memory per commit). Runs before the scenarios that query the index,
    so its last rebuild leaves their index current."""
    config = ctx.config
    rows: list[Row] = []
    stores = [
        (ctx.bare_store(config.read_size).path, config.read_size, "--sizes"),
        (
            ctx.history_store(config.history_commits).path,
            config.history_commits,
            "--history-commits",
        ),
    ]
    for path, size, option in stores:
        index = gitmem.open(path).index()
        results: list[Any] = []

        def rebuild(index: Any = index, results: list[Any] = results) -> None:
            results.append(index.rebuild())

        log(f"index rebuild of {path.parent.name}")
        seconds = measure_budget(rebuild, runs=config.slow_repeat, budget=config.budget)
        took = median(seconds)
        stats = results[-1]
        stopped = len(seconds) < config.slow_repeat
        rows.append(
            Row(
                "index full rebuild",
                f"{stats.memories:,} memories, {stats.applied_commits:,} commits",
                "seconds",
                took,
                compare="none",
                runs=len(seconds),
                target="≤ 60 s at 100k",
                met=took <= 60.0 if size >= TARGET_MEMORIES else None,
                note=_join(
                    f"{stats.memories / took:,.0f} memories/s, "
                    f"{stats.applied_commits / took:,.0f} commits/s",
                    f"stopped after {len(seconds)} of {config.slow_repeat} runs at the "
                    f"{config.budget:.0f} s budget (--budget)"
                    if stopped
                    else "",
                    _at(size, TARGET_MEMORIES, option),
                ),
            )
        )
    return rows


# -- history and versions --------------------------------------------------------------------


@scenario("history", "history of one memory vs git log --follow")
def history(ctx: Context) -> list[Row]:
    config = ctx.config
    hist = ctx.history_store(config.history_commits)
    store = ctx.indexed(hist.path)
    log(f"history of one memory in {hist.commits:,} commits")

    def op(_: int) -> None:
        found = store.history(hist.tracked_id)
        if len(found) != hist.versions or found.warnings:
            raise AssertionError(
                f"history found {len(found)} versions (expected {hist.versions}); "
                f"warnings: {found.warnings}"
            )

    def git_op(_: int) -> None:
        out = git(hist.path, "log", "--follow", "--format=%H", "--", hist.tracked_path)
        if len(out.split()) != hist.versions:
            raise AssertionError(f"git log --follow found {len(out.split())} commits")

    calls = 10 if _indexed() else 1
    stats, baseline = measure_alternating(
        [Timed(op, calls, 2 if calls > 1 else 1), Timed(git_op, 1, 1)], config.slow_repeat
    )
    value = ms(stats.p50)
    ratio = baseline.p50 / stats.p50
    return [
        Row(
            f"history of one memory ({hist.versions} versions)",
            f"{size_label(hist.commits)} commits",
            "ms",
            value,
            "`git log --follow -- <path>`",
            ms(baseline.p50),
            higher_is_better=False,
            runs=stats.runs,
            target="≤ 10 ms and ≥ 50x faster",
            met=value <= 10.0 and ratio >= 50.0,
            note=_join(
                f"{ms(1 / stats.cpu_rate):,.0f} ms of CPU per call",
                f"history written with git fast-import in {hist.build_seconds:.0f} s",
                _at(hist.commits, TARGET_COMMITS, "--history-commits"),
            ),
        )
    ]


def seed_latest_version(checkout: Path, start: str) -> str:
    """The seed's LatestVersion: read every memory file, parse its front-matter, follow
    ``supersedes`` forward (the highest version wins a fork)."""
    successors: dict[str, list[tuple[int, str]]] = {}
    for path in (checkout / "memories").glob("**/*.md"):  # both layouts (docs/format.md)
        meta = frontmatter.loads(path.read_text(encoding="utf-8")).metadata
        old = meta.get("supersedes")
        if old:
            version = int(str(meta.get("version", 1)))
            successors.setdefault(str(old), []).append((version, str(meta["id"])))
    current, seen = start, {start}
    while successors.get(current):
        _, nxt = max(successors[current])
        if nxt in seen:
            break
        seen.add(nxt)
        current = nxt
    return current


@scenario("latest-version", "latest_version vs a scan of every memory's supersedes")
def latest_version(ctx: Context) -> list[Row]:
    config = ctx.config
    populated = ctx.bare_store(config.latest_size)
    checkout = ctx.checkout(config.latest_size)
    store = ctx.indexed(populated.path)
    root, last = populated.chain[0], populated.chain[-1]
    log(f"latest_version in a store of {populated.size:,} memories")

    def op(_: int) -> None:
        found = store.latest_version(root).id
        if found != last:
            raise AssertionError(f"latest_version gave {found}, expected {last}")

    def seed_op(_: int) -> None:
        found = seed_latest_version(checkout, root)
        if found != last:
            raise AssertionError(f"the seed scan gave {found}, expected {last}")

    calls = 20 if _indexed() else 1
    stats, baseline = measure_alternating(
        [Timed(op, calls, 3 if calls > 1 else 1), Timed(seed_op, 1, 1)], config.slow_repeat
    )
    value = ms(stats.p50)
    slow = not _indexed()
    linear = stats.p50 * TARGET_MEMORIES / populated.size
    return [
        Row(
            f"latest_version (chain of {len(populated.chain)})",
            f"{size_label(populated.size)} memories",
            "ms",
            value,
            "read + parse every file's front-matter",
            ms(baseline.p50),
            higher_is_better=False,
            runs=stats.runs,
            target="≤ 1 ms",
            met=value <= 1.0,
            note=_join(
                "without the index each call parses every memory, "
                f"so ≈ {linear:.0f} s at 100k if linear"
                if slow
                else f"{calls} calls per run after the index caught up",
                _at(populated.size, TARGET_MEMORIES, "--latest-size"),
            ),
        )
    ]


@scenario("index-catchup", "index catch-up after new commits", requires=_needs_index)
def index_catchup(ctx: Context) -> list[Row]:
    """Adds ``catchup_commits`` commits (one new memory each, with git fast-import, untimed) to
    the history store, whose index is current, then times the catch-up. Each run adds
    another batch, so this runs after the history scenario."""
    config = ctx.config
    hist = ctx.history_store(config.history_commits)
    store = ctx.indexed(hist.path)
    index = store.index()
    count = config.catchup_commits
    seconds: list[float] = []
    spent = 0.0
    applied = 0
    while len(seconds) < config.slow_repeat and (not seconds or spent < config.budget):
        spent += append_commits(hist.path, count, ctx.rng, ctx.root)
        log(f"index catch-up after {count:,} new commits")
        with Stopwatch() as watch:
            stats = index.catch_up()
        seconds.append(watch.seconds)
        spent += watch.seconds
        applied = stats.applied_commits if stats is not None else 0
    took = median(seconds)
    return [
        Row(
            "index catch-up after new commits",
            f"{count:,} new commits on {size_label(hist.commits)}",
            "seconds",
            took,
            compare="none",
            runs=len(seconds),
            target="≤ 10 s for 10k commits",
            met=took <= 10.0 if count >= 10_000 else None,
            note=_join(
                f"{count / took:,.0f} commits/s ({applied:,} applied in the last run); "
                "each run first adds its commits with git fast-import",
                _at(count, 10_000, "--catchup-commits"),
            ),
        )
    ]


# -- search ------------------------------------------------------------------------------------


def _needs_search() -> str | None:
    if hasattr(gitmem.Store, "search"):
        return None
    return "Store.search does not exist yet (issue 3: index and search)"


@scenario("search", "search FTS and regex (p50) vs grep -rn", requires=_needs_search)
def search(ctx: Context) -> list[Row]:
    """FTS and regex search over the read-size store, beside ``grep -rn`` over a checkout."""
    config = ctx.config
    populated = ctx.bare_store(config.read_size)
    checkout = ctx.checkout(config.read_size)
    store: Any = ctx.indexed(populated.path)
    number = populated.size // 2  # "Benchmark memory <number>." is in one body
    queries = [
        ("fts", "migration", "migration", "a common word: in about 2 of 3 memories"),
        ("fts", f'"memory {number}"', f"memory {number}\\b", "a rare phrase: one memory"),
        ("regex", r"retry\s+timeout", r"retry\s+timeout", ""),
    ]
    rows: list[Row] = []
    for mode, query, pattern, what in queries:

        def op(_: int, mode: str = mode, query: str = query) -> None:
            store.search(query, mode=mode)

        def grep_op(_: int, pattern: str = pattern) -> None:
            command = ["grep", "-rnE", pattern, "memories"]
            subprocess.run(command, cwd=checkout, capture_output=True, check=False)

        stats, baseline = measure_alternating(
            [Timed(op, 5, 2), Timed(grep_op, 1, 1)], config.repeat
        )
        value = ms(stats.p50)
        ratio = baseline.p50 / stats.p50
        fts = mode == "fts"
        rows.append(
            Row(
                f"search, {mode} (`{query}`)",
                f"{size_label(populated.size)} memories",
                "p50 ms",
                value,
                "`grep -rn` over a checkout",
                ms(baseline.p50),
                higher_is_better=False,
                runs=stats.runs,
                target="≤ 20 ms and ≥ 20x faster than grep" if fts else "",
                met=(value <= 20.0 and ratio >= 20.0) if fts else None,
                note=_join(
                    what,
                    f"{len(store.search(query, mode=mode))} result(s) (limit 20); grep "
                    "prints every match",
                    _at(populated.size, TARGET_MEMORIES, "--sizes"),
                ),
            )
        )
    return rows


# -- concurrency -----------------------------------------------------------------------------


@scenario("writers", "concurrent writers, processes on one bare store")
def writers(ctx: Context) -> list[Row]:
    config = ctx.config
    populated = ctx.bare_store(config.writers_size)
    counts = sorted(set(config.writers) | {1})
    rates: dict[int, float] = {}
    rows: list[Row] = []
    for count in counts:
        log(f"{count} concurrent writer(s) on a store of {populated.size:,} memories")
        rounds = run_rounds(
            populated.path, count, config.writer_ops, config.repeat, config.seed + count
        )
        acknowledged = [mid for r in rounds for mid in r.acknowledged]
        lost = lost_writes(populated.path, acknowledged)
        errors = sum(len(r.errors) for r in rounds)
        cpu_ms = 1e3 * sum(r.cpu_seconds for r in rounds) / max(1, sum(r.timed for r in rounds))
        rates[count] = median([r.rate for r in rounds])
        if count not in config.writers:
            continue
        eight = count >= TARGET_WRITERS
        met = not lost and (rates[count] >= rates[1] if eight else True)
        rows.append(
            Row(
                "concurrent writers, aggregate",
                f"{count} process{'es' if count > 1 else ''}, "
                f"{size_label(populated.size)} memories",
                "commits/s",
                rates[count],
                "1 writer",
                rates[1],
                runs=len(rounds),
                target="0 lost writes" + ("; ≥ 1 writer's rate" if eight else ""),
                met=met,
                note=f"{len(lost)} lost of {len(acknowledged)} acknowledged; {errors} errors"
                + (f" (first: {rounds[0].errors[0][:80]})" if errors and rounds[0].errors else "")
                + f"; {cpu_ms:.1f} ms of CPU per commit, all writers together",
            )
        )
    return rows


# -- maintenance -----------------------------------------------------------------------------


@scenario("store-size", "store size on disk before and after git gc")
def store_size(ctx: Context) -> list[Row]:
    """Runs last: ``git gc`` packs the store, so reads are measured again after it."""
    populated = ctx.bare_store(ctx.config.read_size)
    path = populated.path
    repo = pygit2.Repository(str(path))
    tree = repo.revparse_single("refs/heads/main").peel(pygit2.Tree)
    raw = sum(len(data) for _, data in iter_blobs(repo, tree, ""))
    derived = gitmem.open(path).db().state_dir  # the index and locks: not git's to pack
    # Under the packing helper's lock: a repack the writes started would move (and delete)
    # loose objects while the sizes are summed.
    with autopack.exclusive(path):
        before = disk_usage(path, exclude=derived)
        log(f"git gc on a store of {populated.size:,} memories")
        with Stopwatch() as watch:
            git(path, "gc", "--quiet", "--prune=now")
        after = disk_usage(path, exclude=derived)
    index_bytes = disk_usage(derived) if derived.exists() else 0
    label = f"{size_label(populated.size)} memories"
    rows = [
        Row(
            "store size on disk, as written (loose objects)",
            label,
            "MB",
            before / 1e6,
            "raw bytes of the files",
            raw / 1e6,
            compare="size",
            runs=1,
            note="disk blocks, as du counts them, without the derived index; "
            "includes every commit the run made",
        ),
        Row(
            "store size on disk after `git gc`",
            label,
            "MB",
            after / 1e6,
            "raw bytes of the files",
            raw / 1e6,
            compare="size",
            runs=1,
            note=f"git gc took {watch.seconds:.1f} s",
        ),
        Row(
            "derived index on disk (`<gitdir>/gitmem/`)",
            label,
            "MB",
            index_bytes / 1e6,
            "raw bytes of the files",
            raw / 1e6,
            compare="size",
            runs=1,
            note="SQLite with FTS5; never committed, rebuilt from git",
        ),
    ]
    stats, baseline, reads = _read_stats(ctx, populated)
    return rows + _read_rows(stats, baseline, populated.size, reads, " after `git gc`")
