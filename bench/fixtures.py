"""Stores, checkouts and histories the scenarios share, each built once per run.

Populated stores are built the way a user imports memories: one ``store.transaction()``
holding every create. Checkouts for the git baselines are ``git clone``s of those stores,
so gitmem and git work on the same files. Long histories are written with
``git fast-import`` (a linear chain of gitmem-format commits): seconds, where as many
gitmem commits would take minutes.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gitmem
from bench.harness import Config, Stopwatch, git, log, size_label
from gitmem.format.layout import memory_path

EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)

_WORDS = (
    "pytest", "fixture", "module", "import", "cache", "index", "branch", "commit", "merge",
    "review", "deploy", "schema", "migration", "logging", "retry", "timeout", "config",
    "docker", "python", "rust", "async", "queue", "worker", "token", "session", "agent",
    "memory", "search", "query", "latency", "release", "version", "lint", "format", "typing",
)  # fmt: skip
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


def fields_for(i: int, rng: random.Random, body: str | None = None) -> Fields:
    """Memory ``i``: 40 words of a small vocabulary, or ``body`` when given."""
    words = rng.choices(_WORDS, k=40)
    if body is None:
        body = f"Benchmark memory {i}. {' '.join(words[:20])}.\n\n{' '.join(words[20:])}.\n"
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
    ]
    if supersedes is not None:
        lines.append(f"supersedes: {supersedes}")
    lines.append("---")
    return "\n".join(lines) + "\n\n" + fields.body


def commit_message(op: str, memory_id: str, title: str) -> str:
    return f"{op}: {title}\n\nGitmem-Op: {op}\nGitmem-Id: {memory_id}\n"


# -- builders -------------------------------------------------------------------------------


@dataclass
class Populated:
    """A store holding ``size`` memories, imported in one transaction."""

    path: Path
    size: int
    ids: list[str]
    checkout: Path | None = None


def populate(path: Path, size: int, *, bare: bool, rng: random.Random) -> Populated:
    """Import ``size`` memories in one transaction, generating each as it is imported."""
    store = gitmem.init(path, bare=bare)
    ids: list[str] = []
    with store.transaction(message=f"import: {size} benchmark memories"):
        for i in range(size):
            fields = fields_for(i, rng)
            ids.append(store.create(fields.body, **fields.create_kwargs()).id)
    return Populated(path, size, ids)


def fast_import(path: Path, commits: Iterable[tuple[str, Iterable[tuple[str, bytes]]]]) -> None:
    """Commit each ``(message, files)`` on top of the store's main branch with ``git
    fast-import``, a second apart from :data:`EPOCH`; ``files`` are (path, file bytes)."""
    chunks: list[bytes] = []
    for n, (message, files) in enumerate(commits):
        when = int(EPOCH.timestamp()) + n + 1
        raw = message.encode()
        chunks += [
            b"commit refs/heads/main\n",
            f"author bench <bench@agents.gitmem.invalid> {when} +0000\n".encode(),
            f"committer gitmem <gitmem@gitmem.invalid> {when} +0000\n".encode(),
            f"data {len(raw)}\n".encode() + raw + b"\n",
            b"from refs/heads/main^0\n" if n == 0 else b"",
        ]
        chunks += [f"M 100644 inline {rel}\ndata {len(data)}\n".encode() + data + b"\n"
                   for rel, data in files]  # fmt: skip
    git(path, "fast-import", "--quiet", "--date-format=raw", stdin=b"".join(chunks))


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


def build_history(path: Path, commits: int, updates: int, rng: random.Random) -> HistoryStore:
    """A gitmem store plus ``commits`` commits, each creating one memory or updating the
    tracked one; the tracked memory's create and ``updates`` updates are spread evenly."""
    if commits < updates + 2:
        raise ValueError(f"a history of {commits} commits cannot hold {updates} updates")
    points = [max(1, round(commits * (k + 1) / (updates + 2))) for k in range(updates + 1)]
    if len(set(points)) != len(points):
        points = list(range(1, updates + 2))
    tracked_id, tracked = new_memory_id(rng), fields_for(0, rng)

    def chain() -> Iterator[tuple[str, list[tuple[str, bytes]]]]:
        version = 0
        for c in range(1, commits + 1):
            when = EPOCH + dt.timedelta(seconds=c)
            if c in points:
                version += 1
                created = EPOCH + dt.timedelta(seconds=points[0])
                body = tracked.body + "".join(f"Update {v}.\n" for v in range(2, version + 1))
                fields = Fields(tracked.title, body, tracked.category, tracked.tags)
                memory_id, op = tracked_id, "create" if version == 1 else "update"
                text = memory_text(memory_id, fields, created=created)
            else:
                memory_id, op, fields = new_memory_id(rng), "create", fields_for(c, rng)
                text = memory_text(memory_id, fields, created=when)
            message = commit_message(op, memory_id, fields.title)
            yield message, [(memory_path(memory_id), text.encode())]

    with Stopwatch() as watch:
        gitmem.init(path, bare=True)
        fast_import(path, chain())
    return HistoryStore(
        path, commits, tracked_id, memory_path(tracked_id), updates + 1, watch.seconds
    )


# -- one run's shared state -------------------------------------------------------------------


@dataclass
class Context:
    """Shared state of one benchmark run: configuration, scratch space, fixtures."""

    config: Config
    root: Path
    rng: random.Random
    _bare: dict[int, Populated] = field(default_factory=dict)
    _history: dict[int, HistoryStore] = field(default_factory=dict)
    _counter: int = 0

    def new_dir(self, name: str) -> Path:
        self._counter += 1
        path = self.root / f"{self._counter:03d}-{name}"
        path.mkdir(parents=True)
        return path

    def bare_store(self, size: int) -> Populated:
        """A bare store of ``size`` memories, with a git checkout of the same files."""
        if size not in self._bare:
            path = self.new_dir(f"bare-{size_label(size)}") / "store.git"
            log(f"importing {size:,} memories into a bare store (one transaction)...")
            populated = populate(path, size, bare=True, rng=self.rng)
            checkout = self.new_dir(f"checkout-{size_label(size)}") / "checkout"
            git(checkout.parent, "clone", "-q", "--branch", "main", str(path), str(checkout))
            populated.checkout = checkout
            self._bare[size] = populated
        return self._bare[size]

    def indexed(self, path: Path) -> gitmem.Store:
        """The store at ``path``, its index caught up with the branch (untimed)."""
        store = gitmem.open(path)
        with Stopwatch() as watch:
            store.index().catch_up()
        if watch.seconds > 1:
            log(f"  brought the index of {path.parent.name} up to date in {watch.seconds:.1f} s")
        return store

    def history_store(self, commits: int) -> HistoryStore:
        if commits not in self._history:
            path = self.new_dir(f"history-{size_label(commits)}") / "store.git"
            log(f"writing a history of {commits:,} commits with git fast-import...")
            updates = self.config.history_updates
            self._history[commits] = build_history(path, commits, updates, self.rng)
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
    """Remove ``root``, again while something reappears in it: a write that made packing
    due may have left a detached ``git`` packing a store, still writing files."""
    deadline = time.monotonic() + timeout
    while True:
        shutil.rmtree(root, ignore_errors=True)
        time.sleep(0.2)
        if not root.exists() or time.monotonic() > deadline:
            return

