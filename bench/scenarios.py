"""The store's own floors: a single create and one memory's history, each beside git.

Scenarios run in registration order (``bench/run.py`` imports the modules in order):
``create`` adds memories to the store it writes into, so readers of the same store come
after it.
"""

from __future__ import annotations

import random

import pygit2

import gitmem
from bench.fixtures import Context, commit_message, fields_for, memory_text, new_memory_id
from bench.harness import Row, Timed, git, log, measure_alternating, ms, scenario, size_label
from gitmem.format.layout import memory_path

CREATE_FLOOR = 250.0
"""Single creates a second into a 20k-memory bare store, and at least 10x git's."""
HISTORY_FLOOR_MS = 10.0
"""One memory's history at 100k commits."""


@scenario("create", "single create into a bare store, beside git add + git commit")
def create(ctx: Context) -> list[Row]:
    """``store.create`` into a bare store, alternating run by run with ``git add`` + ``git
    commit`` of a new memory file in a checkout of the same files."""
    config = ctx.config
    populated = ctx.bare_store(config.create_size)
    checkout = populated.checkout
    assert checkout is not None
    store = gitmem.open(populated.path)
    rng = random.Random(config.seed)
    pool = [fields_for(i, rng) for i in range(config.warmup + config.repeat * config.ops)]
    now = gitmem.SystemClock().now()
    files = []
    for fields in pool[: config.warmup + config.repeat * config.git_ops]:
        memory_id = new_memory_id(rng)
        text = memory_text(memory_id, fields, created=now)
        message = commit_message("create", memory_id, fields.title)
        files.append((memory_path(memory_id), text.encode(), message))

    def gitmem_op(i: int) -> None:
        store.create(pool[i].body, **pool[i].create_kwargs())

    def git_op(i: int) -> None:
        rel, data, message = files[i]
        (checkout / rel).parent.mkdir(parents=True, exist_ok=True)
        (checkout / rel).write_bytes(data)
        git(checkout, "add", "--", rel)
        git(checkout, "commit", "-q", "--no-verify", "-m", message)

    log(f"single create into a bare store of {populated.size:,} memories, beside git")
    mine, theirs = measure_alternating(
        [Timed(gitmem_op, config.ops, config.warmup), Timed(git_op, config.git_ops, config.warmup)],
        config.repeat,
    )
    at_floor = populated.size >= 20_000
    return [
        Row(
            "single create, bare store",
            f"{size_label(populated.size)} memories",
            "creates/s",
            mine.rate,
            "`git add` + `git commit` per file",
            theirs.rate,
            runs=mine.runs,
            target=f"≥ {CREATE_FLOOR:.0f}/s and ≥ 10x git at 20k",
            met=(mine.rate >= CREATE_FLOOR and mine.rate >= 10 * theirs.rate) if at_floor else None,
            note=f"p50 {ms(mine.p50):.2f} ms, p99 {ms(mine.p99):.2f} ms; "
            f"{mine.cpu_rate:,.0f}/s of CPU time",
        )
    ]


@scenario("history", "history of one memory, beside git log --follow")
def history(ctx: Context) -> list[Row]:
    """``store.history`` of a memory with 6 versions in a fast-imported history, its index
    caught up, beside ``git log --follow`` of its file."""
    config = ctx.config
    hist = ctx.history_store(config.history_commits)
    store = ctx.indexed(hist.path)
    log(f"history of one memory in {hist.commits:,} commits")

    def op(_: int) -> None:
        found = store.history(hist.tracked_id)
        if len(found) != hist.versions or found.warnings:
            raise AssertionError(f"history found {len(found)} versions, not {hist.versions}")

    def git_op(_: int) -> None:
        out = git(hist.path, "log", "--follow", "--format=%H", "--", hist.tracked_path)
        if len(out.split()) != hist.versions:
            raise AssertionError(f"git log --follow found {len(out.split())} commits")

    mine, theirs = measure_alternating([Timed(op, 10, 2), Timed(git_op, 1, 1)], config.slow_repeat)
    value = ms(mine.p50)
    return [
        Row(
            f"history of one memory ({hist.versions} versions)",
            f"{size_label(hist.commits)} commits",
            "ms",
            value,
            "`git log --follow -- <path>`",
            ms(theirs.p50),
            higher_is_better=False,
            runs=mine.runs,
            target=f"≤ {HISTORY_FLOOR_MS:.0f} ms at 100k commits",
            met=value <= HISTORY_FLOOR_MS if hist.commits >= 100_000 else None,
            note=f"the history written with git fast-import in {hist.build_seconds:.0f} s",
        )
    ]


# -- bare pygit2 calls (used by bench/createcpu.py and bench/packwrite.py) ---------------------


def pygit2_create(
    repo: pygit2.Repository, rel: str, data: bytes, message: str, signature: pygit2.Signature
) -> None:
    """One create with bare pygit2 calls: the blob, the trees along ``rel``, the commit on
    main's tip, main moved."""
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

