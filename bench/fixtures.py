"""Stores, checkouts and histories the scenarios share, each built once per run.

Populated stores are built the way a user would import memories: one
``store.transaction()`` holding every create, which is itself the bulk-import scenario, so
its time is recorded. Checkouts for the git baselines are ``git clone``s of those stores, so
gitmem and git work on the same files. The 100k-commit history is written with
``git fast-import`` (a linear chain of gitmem-format commits), which takes seconds where
100k gitmem commits would take minutes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import itertools
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pygit2

import gitmem
from bench.harness import Config, Stopwatch, git, log, size_label
from gitmem.base import paths
from gitmem.format.layout import memory_path
from gitmem.git import autopack

CHAIN_LENGTH = 5
"""Each populated store holds a supersede chain this long (root plus 4 successors)."""

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

_WORDS = (
    "pytest", "fixture", "module", "import", "cache", "index", "branch", "commit", "merge",
    "review", "deploy", "schema", "migration", "logging", "retry", "timeout", "config",
    "docker", "python", "rust", "async", "queue", "worker", "token", "session", "agent",
    "memory", "search", "query", "latency", "release", "version", "lint", "format", "typing",
)
_CATEGORIES = ("coding-preferences", "project-conventions", "architectural-decisions", "patterns")
_TAGS = ("testing", "python", "ci", "style", "perf", "security", "docs", "infra")


# -- memory content ----------------------------------------------------------------------


@dataclass(frozen=True)
class Fields:
    """What a benchmark memory says: the same shape for gitmem and the baselines."""

    title: str
    body: str
    category: str
    tags: tuple[str, str]

    def create_kwargs(self) -> dict[str, Any]:
        return {"title": self.title, "category": self.category, "tags": list(self.tags)}


def fields_for(i: int, rng: random.Random) -> Fields:
    words = rng.choices(_WORDS, k=40)
    body = (
        f"Benchmark memory {i}. " + " ".join(words[:20]) + ".\n\n" + " ".join(words[20:]) + ".\n"
    )
    tags = rng.sample(_TAGS, 2)
    return Fields(
        title=f"Bench memory {i} on {words[0]} and {words[1]}",
        body=body,
        category=_CATEGORIES[i % len(_CATEGORIES)],
        tags=(tags[0], tags[1]),
    )


def new_memory_id(rng: random.Random) -> str:
    return f"mem_{uuid.UUID(int=rng.getrandbits(128), version=4)}"


def timestamp(when: dt.datetime) -> str:
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def memory_text(
    memory_id: str,
    fields: Fields,
    *,
    created: dt.datetime,
    updated: dt.datetime | None = None,
    version: int = 1,
    supersedes: str | None = None,
) -> str:
    """The file gitmem writes for these fields (tests/test_bench.py checks it byte for byte).

    Written from a template, not through the library, so baselines and fast-imported
    histories cost no YAML dumping.
    """
    lines = [
        "---",
        f"id: {memory_id}",
        f"title: {fields.title}",
        "scope: repo",
        f"category: {fields.category}",
        f"tags: [{fields.tags[0]}, {fields.tags[1]}]",
        f"created_at: {timestamp(created)}",
        f"updated_at: {timestamp(updated or created)}",
        f"version: {version}",
    ]
    if supersedes is not None:
        lines.append(f"supersedes: {supersedes}")
    lines.append("---")
    return "\n".join(lines) + "\n\n" + fields.body


def commit_message(op: str, memory_id: str, title: str) -> str:
    return f"{op}: {title}\n\nGitmem-Op: {op}\nGitmem-Id: {memory_id}\n"


# -- what the fixtures are -------------------------------------------------------------------


@dataclass
class Populated:
    """A store holding ``size`` memories, imported in one transaction."""

    path: Path
    size: int
    bare: bool
    ids: list[str]
    chain: list[str]
    """A supersede chain, root first: ``latest_version(chain[0])`` is ``chain[-1]``."""
    import_seconds: float
    commit: str
    """The commit the import made (checkouts and the fast-import baseline start here)."""
    checkout: Path | None = None


@dataclass
class HistoryStore:
    """A bare store whose branch is a linear chain of ``commits`` one-file commits."""

    path: Path
    commits: int
    tracked_id: str
    tracked_path: str
    versions: int
    """How many commits touched the tracked memory (its create plus updates)."""
    build_seconds: float


@dataclass
class Context:
    """Shared state of one benchmark run: configuration, scratch space, fixtures."""

    config: Config
    root: Path
    rng: random.Random
    _bare: dict[int, Populated] = field(default_factory=dict)
    _worktree: dict[int, Populated] = field(default_factory=dict)
    _history: dict[int, HistoryStore] = field(default_factory=dict)
    _counter: int = 0

    # -- scratch space --------------------------------------------------------------

    def new_dir(self, name: str) -> Path:
        self._counter += 1
        path = self.root / f"{self._counter:03d}-{name}"
        path.mkdir(parents=True)
        return path

    # -- stores -------------------------------------------------------------------------

    def bare_store(self, size: int) -> Populated:
        if size not in self._bare:
            self._bare[size] = self._populate(size, bare=True)
            self._bare[size].checkout = self._clone(self._bare[size])
        return self._bare[size]

    def worktree_store(self, size: int) -> Populated:
        if size not in self._worktree:
            self._worktree[size] = self._populate(size, bare=False)
        return self._worktree[size]

    def checkout(self, size: int) -> Path:
        """A git checkout holding the same files as the bare store of ``size`` memories."""
        populated = self.bare_store(size)
        assert populated.checkout is not None
        return populated.checkout

    def bare_stores(self) -> list[Populated]:
        return [self._bare[n] for n in sorted(self._bare)]

    def _populate(self, size: int, *, bare: bool) -> Populated:
        kind = "bare" if bare else "work-tree"
        path = self.new_dir(f"{kind}-{size_label(size)}") / ("store.git" if bare else "store")
        log(f"importing {size:,} memories into a {kind} store (one transaction)...")
        populated = populate(path, size, bare=bare, rng=self.rng)
        log(f"  {populated.import_seconds:.1f} s")
        return populated

    def _clone(self, populated: Populated) -> Path:
        target = self.new_dir(f"checkout-{size_label(populated.size)}") / "checkout"
        log(f"cloning a checkout of {populated.size:,} files...")
        git(target.parent, "clone", "-q", "--branch", "main", str(populated.path), str(target))
        return target

    def indexed(self, path: Path) -> gitmem.Store:
        """The store at ``path``, its index caught up with the branch (untimed)."""
        store = gitmem.open(path)
        if not hasattr(store, "index"):  # a gitmem without the index
            return store
        with Stopwatch() as watch:
            store.index().catch_up()
        if watch.seconds > 1:
            log(f"  brought the index of {path.parent.name} up to date in {watch.seconds:.1f} s")
        return store

    def history_store(self, commits: int) -> HistoryStore:
        if commits not in self._history:
            path = self.new_dir(f"history-{size_label(commits)}") / "store.git"
            log(f"writing a history of {commits:,} commits with git fast-import...")
            self._history[commits] = build_history(
                path, commits, self.config.history_updates, self.rng, self.root
            )
            log(f"  {self._history[commits].build_seconds:.1f} s")
        return self._history[commits]



@contextlib.contextmanager
def workspace(config: Config) -> Iterator[Path]:
    """A scratch directory for one run, removed afterwards unless ``--keep``."""
    if config.workdir is not None:
        config.workdir.mkdir(parents=True, exist_ok=True)
    root = Path(tempfile.mkdtemp(prefix="gitmem-bench-", dir=config.workdir))
    try:
        yield root
    finally:
        if config.keep:
            log(f"kept the scratch directory {root}")
        else:
            remove_scratch(root)


def remove_scratch(root: Path, timeout: float = 60.0) -> None:
    """Remove ``root`` once no automatic packing helper works in it.

    A write that made packing due leaves a detached helper running (``git repack``
    writes a pack into the store); removing the store under it leaves the files it
    writes afterwards behind. So wait for every store's packing lock, remove, and try
    again while something reappeared.
    """
    deadline = time.monotonic() + timeout
    while True:
        for lock in root.glob(f"**/{paths.STATE_DIR}/{paths.AUTOPACK_LOCK}"):
            with contextlib.suppress(OSError, TimeoutError), autopack.exclusive(
                lock.parent.parent, timeout=max(0.0, deadline - time.monotonic())
            ):
                pass
        shutil.rmtree(root, ignore_errors=True)
        if not root.exists() or time.monotonic() > deadline:
            return
        time.sleep(0.1)


# -- builders -------------------------------------------------------------------------------


def tip(path: Path) -> str:
    repo = pygit2.Repository(str(path))
    return str(repo.references["refs/heads/main"].target)


def populate(
    path: Path, size: int, *, bare: bool, rng: random.Random, format: int | None = None
) -> Populated:
    """Import ``size`` memories in one transaction. The content is generated as it is
    imported (the same content, in the same order, as generating it all beforehand): at
    1M memories the generated inputs alone took gigabytes, more than the import.
    ``format``: the store format (default: what ``gitmem init`` makes)."""
    store = gitmem.init(path, bare=bare, format=format)
    chain_length = max(1, min(CHAIN_LENGTH, size // 2))
    contents = (fields_for(i, rng) for i in range(size))
    plain = size - chain_length + 1
    ids: list[str] = []
    chain: list[str] = []
    with Stopwatch() as watch, store.transaction(message=f"import: {size} benchmark memories"):
        for fields in itertools.islice(contents, plain):
            ids.append(store.create(fields.body, **fields.create_kwargs()).id)
        chain.append(ids[-1])
        for fields in contents:
            chain.append(store.supersede(chain[-1], fields.body).id)
            ids.append(chain[-1])
    return Populated(path, size, bare, ids, chain, watch.seconds, tip(path))


def _commit_header(when: int, message: bytes) -> bytes:
    return (
        b"commit refs/heads/main\n"
        + f"author bench <bench@agents.gitmem.invalid> {when} +0000\n".encode()
        + f"committer gitmem <gitmem@gitmem.invalid> {when} +0000\n".encode()
        + f"data {len(message)}\n".encode()
        + message
        + b"\n"
    )


def _inline(path: str, data: bytes) -> bytes:
    return f"M 100644 inline {path}\ndata {len(data)}\n".encode() + data + b"\n"


def build_history(
    path: Path, commits: int, updates: int, rng: random.Random, scratch: Path
) -> HistoryStore:
    """A gitmem store plus ``commits`` commits, each creating one memory or updating the
    tracked one; the tracked memory's create and ``updates`` updates are spread evenly."""
    if commits < updates + 2:
        raise ValueError(f"a history of {commits} commits cannot hold {updates} updates")
    with Stopwatch() as watch:
        gitmem.init(path, bare=True)
        base = tip(path)
        points = [max(1, round(commits * (k + 1) / (updates + 2))) for k in range(updates + 1)]
        if len(set(points)) != len(points):
            points = list(range(1, updates + 2))
        create_at, update_at = points[0], set(points[1:])
        tracked_id = new_memory_id(rng)
        tracked = fields_for(0, rng)
        created = EPOCH
        version = 0
        stream = scratch / f"history-{commits}.fast-import"
        with open(stream, "wb") as out:
            for c in range(1, commits + 1):
                when = EPOCH + dt.timedelta(seconds=c)
                if c == create_at or c in update_at:
                    version += 1
                    created = when if c == create_at else created
                    body = tracked.body + "".join(f"Update {v}.\n" for v in range(2, version + 1))
                    fields = Fields(tracked.title, body, tracked.category, tracked.tags)
                    memory_id = tracked_id
                    op = "create" if c == create_at else "update"
                    text = memory_text(
                        memory_id, fields, created=created, updated=when, version=version
                    )
                else:
                    memory_id = new_memory_id(rng)
                    fields = fields_for(c, rng)
                    op = "create"
                    text = memory_text(memory_id, fields, created=when)
                message = commit_message(op, memory_id, fields.title).encode()
                out.write(_commit_header(int(when.timestamp()), message))
                if c == 1:
                    out.write(f"from {base}\n".encode())
                out.write(_inline(memory_path(memory_id), text.encode()))
        git(path, "fast-import", "--quiet", "--date-format=raw", stdin_path=stream)
        stream.unlink()
    return HistoryStore(
        path, commits, tracked_id, memory_path(tracked_id), updates + 1, watch.seconds
    )


def append_commits(path: Path, count: int, rng: random.Random, scratch: Path) -> float:
    """``count`` more commits on the branch, each creating one memory (git fast-import).

    Returns the seconds it took (not a measurement: it prepares the index catch-up).
    """
    with Stopwatch() as watch:
        repo = pygit2.Repository(str(path))
        parent = repo.revparse_single("refs/heads/main").peel(pygit2.Commit)
        start = parent.commit_time + 1
        stream = scratch / f"append-{count}.fast-import"
        with open(stream, "wb") as out:
            for c in range(count):
                when = dt.datetime.fromtimestamp(start + c, dt.UTC)
                memory_id = new_memory_id(rng)
                fields = fields_for(c, rng)
                message = commit_message("create", memory_id, fields.title).encode()
                out.write(_commit_header(int(when.timestamp()), message))
                if c == 0:
                    out.write(f"from {parent.id}\n".encode())
                text = memory_text(memory_id, fields, created=when)
                out.write(_inline(memory_path(memory_id), text.encode()))
        git(path, "fast-import", "--quiet", "--date-format=raw", stdin_path=stream)
        stream.unlink()
    return watch.seconds


def write_import_stream(source: Path, commit: str, out_path: Path) -> int:
    """A fast-import stream of every file in ``commit`` of ``source``, as one commit.

    Returns the raw bytes of the files.
    """
    repo = pygit2.Repository(str(source))
    tree = repo.revparse_single(commit).peel(pygit2.Tree)
    total = 0
    message = b"import: benchmark memories\n"
    with open(out_path, "wb") as out:
        out.write(_commit_header(int(EPOCH.timestamp()), message))
        for path, data in iter_blobs(repo, tree, ""):
            total += len(data)
            out.write(_inline(path, data))
    return total


def iter_blobs(
    repo: pygit2.Repository, tree: pygit2.Tree, prefix: str
) -> Iterator[tuple[str, bytes]]:
    for entry in tree:
        path = f"{prefix}{entry.name}"
        obj = repo[entry.id]
        if isinstance(obj, pygit2.Tree):
            yield from iter_blobs(repo, obj, path + "/")
        elif isinstance(obj, pygit2.Blob):
            yield path, obj.data


def disk_usage(path: Path, *, exclude: Path | None = None) -> int:
    """Bytes allocated on disk under ``path`` (what ``du`` counts), leaving out ``exclude``."""
    total = 0
    for item in [path, *path.rglob("*")]:
        if exclude is not None and (item == exclude or exclude in item.parents):
            continue
        try:
            st = item.lstat()
        except FileNotFoundError:
            continue
        total += st.st_blocks * 512
    return total
