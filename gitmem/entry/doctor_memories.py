"""Health checks of the memories: the index against git, the schema, conflict markers,
case twins, links, version chains and credentials (``gitmem doctor``)."""

from __future__ import annotations

import contextlib
import hashlib
import os
import re
import shlex
import sqlite3
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import IO, Any

import pygit2

from gitmem.base.errors import GitmemError, RepositoryDamagedError
from gitmem.entry.doctor_context import (
    ERROR,
    INFO,
    WARNING,
    Context,
    Entry,
    Finding,
    IndexView,
    case_twins,
    damaged_finding,
)
from gitmem.format import secrets as secrets_mod
from gitmem.format.layout import id_from_path
from gitmem.format.model import Memory, Scope
from gitmem.git.locks import temp_path
from gitmem.git.objects import OVER_READ_LIMIT, blob_data, get_commit
from gitmem.store import derived
from gitmem.store.commit_changes import changed_memory_files
from gitmem.store.core import Store
from gitmem.store.index_queries import problem_rows


def _by_id(memories: Iterable[Memory]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for memory in memories:
        data = memory.to_dict()
        data.pop("store_scope", None)
        out[memory.id] = data
    return out


def check_index(ctx: Context) -> Iterator[Finding]:
    from gitmem.store.reads import index_writable

    if not index_writable(ctx.store.db(ctx.scope)):
        # Not a fault to rebuild (reindex would fail the same way): reads scan git instead.
        yield Finding(
            "index",
            INFO,
            "the store is read-only for you: its index is not used or updated (reads scan git)",
        )
        return
    view = ctx.view()
    if view is None:
        if isinstance(ctx._view_exc, (RepositoryDamagedError, KeyError, pygit2.GitError)):
            # git's objects are damaged, not the index: a rebuild would fail the same way.
            yield damaged_finding("index", ctx, ctx._view_exc)
            return
        yield _rebuild_finding(ctx, f"the index cannot be read ({ctx._view_error})")
        return
    if ctx.deep:
        try:
            yield from _deep_index_check(ctx)
        except (RepositoryDamagedError, pygit2.GitError) as exc:
            yield damaged_finding("index", ctx, exc)
        except Exception as exc:  # any failure of the derived index is a finding, not a crash
            yield _rebuild_finding(ctx, f"the index cannot be read ({type(exc).__name__}: {exc})")
        return
    stale = list(view.stale)
    if view.agrees:
        try:
            stale = _check_content(ctx, view)
        except (RepositoryDamagedError, pygit2.GitError) as exc:
            yield damaged_finding("index", ctx, exc)
            return
        except Exception as exc:  # as above
            yield _rebuild_finding(ctx, f"the index cannot be read ({type(exc).__name__}: {exc})")
            return
    message = _disagreement(view.missing, view.extra, stale, len(view.problem_diff))
    if message:
        yield _rebuild_finding(ctx, message)


def _check_content(ctx: Context, view: IndexView) -> list[str]:
    """Ids among a spread sample of rows whose fields differ from their file decoded from
    git. Matching blob ids say each row was made from the right file; this says it was
    made right (and catches a tampered row) without decoding the whole store."""
    sample = list(view.sample)
    index = ctx.store.index(ctx.scope)
    differ = []
    decoded: dict[str, Memory | None] = {}
    for path in sample:
        try:
            decoded[path] = index.decode(
                blob_data(ctx.db.repo, pygit2.Oid(hex=view.sample[path])), path
            )
        except RepositoryDamagedError:
            raise  # the object, not the row, is wrong: reported as damage, not as staleness
        except GitmemError:
            differ.append(id_from_path(path) or "")
    # The rows hold the version and updated_at derived from history; one walk of it derives
    # the whole sample's.
    commit = get_commit(ctx.db.repo, view.commit) if view.commit is not None else None
    for path, memory in derived.as_read(ctx.db.repo, commit, decoded).items():
        indexed = index.get(id_from_path(path) or "")
        if memory is None or indexed is None or _by_id([indexed]) != _by_id([memory]):
            differ.append(id_from_path(path) or "")
    if differ:
        # The rows were read one by one: a write since the view may have changed one.
        now = ctx.db.snapshot()
        changed = {id_from_path(p) for p in sample if str(now.blob_id(p)) != view.sample[p]}
        differ = [i for i in differ if i not in changed]
    return sorted(differ)


def _deep_index_check(ctx: Context) -> Iterator[Finding]:
    """Every index row compared, column by column, with the row a rebuild from git makes
    (:meth:`Context.rebuilt`, at the commit the view compared), both read in id order a
    page at a time: nothing per memory is held, where decoding the store held all of it."""
    index = ctx.store.index(ctx.scope)
    rebuilt = ctx.rebuilt()
    missing: list[str] = []
    extra: list[str] = []
    differ: list[str] = []
    with index.reading() as ours, rebuilt.reading() as fresh:
        row = ours.execute("SELECT value FROM meta WHERE key = 'commit'").fetchone()
        commit = str(row[0]) if row is not None and row[0] else None
        columns = [
            str(r[1]) for r in ours.execute("PRAGMA table_info(memories)") if r[1] != "rowid"
        ]
        theirs = _rows_by_id(fresh, columns)
        pending = next(theirs, None)
        for mine in _rows_by_id(ours, columns):
            while pending is not None and pending[0] < mine[0]:
                missing.append(pending[0])
                pending = next(theirs, None)
            if pending is None or pending[0] != mine[0]:
                extra.append(mine[0])
                continue
            if pending != mine:
                differ.append(mine[0])
            pending = next(theirs, None)
        while pending is not None:
            missing.append(pending[0])
            pending = next(theirs, None)
        problems = {str(path) for path, _ in problem_rows(ours)} ^ {
            str(path) for path, _ in problem_rows(fresh)
        }
    if commit != rebuilt.commit:
        # A write since the view moved the store's index on: the memories it changed are
        # not told apart from damage, so they are left out.
        moved = _changed_ids(ctx, rebuilt.commit, commit)
        missing, extra, differ = (
            [i for i in ids if i not in moved] for ids in (missing, extra, differ)
        )
        problems = set()
    message = _disagreement(missing, extra, differ, len(problems))
    if message:
        yield _rebuild_finding(ctx, message)


_DEEP_PAGE = 2_000
"""Rows of each index read per query by the deep comparison."""


def _rows_by_id(conn: sqlite3.Connection, columns: Sequence[str]) -> Iterator[tuple[Any, ...]]:
    """Every row of the ``memories`` table (``columns``, id first), in id order, a page at
    a time."""
    names = ", ".join(f'"{c}"' for c in ["id", *(c for c in columns if c != "id")])
    after: str | None = None
    while True:
        page = conn.execute(
            f"SELECT {names} FROM memories {'WHERE id > ? ' if after is not None else ''}"
            f"ORDER BY id LIMIT {_DEEP_PAGE}",
            (after,) if after is not None else (),
        ).fetchall()
        yield from page
        if len(page) < _DEEP_PAGE:
            return
        after = page[-1][0]


def _changed_ids(ctx: Context, old: str | None, new: str | None) -> set[str]:
    """Ids of the memories whose files differ between two commits of the store."""
    repo = ctx.db.repo
    trees = [get_commit(repo, c).tree if c is not None else None for c in (old, new)]
    if trees[1] is None:
        return set()
    return {
        memory_id
        for path, _ in changed_memory_files(repo, trees[0], trees[1])
        if (memory_id := id_from_path(path)) is not None
    }


def _disagreement(missing: list[str], extra: list[str], stale: list[str], problems: int) -> str:
    parts = []
    for label, ids in (("missing", missing), ("not in git", extra), ("stale", stale)):
        if ids:
            parts.append(
                f"{len(ids)} {label} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
            )
    if problems:
        parts.append(f"{problems} unreadable file(s) seen differently")
    return "the index disagrees with git: " + "; ".join(parts) if parts else ""


def _rebuild_finding(ctx: Context, message: str) -> Finding:
    store, scope = ctx.store, ctx.scope
    return Finding(
        "index",
        WARNING,
        message,
        fix=f"gitmem --store {ctx.where} reindex",
        safe=True,
        apply=lambda: _rebuild(store, scope, ctx),
    )


def _rebuild(store: Store, scope: Scope, ctx: Context) -> None:
    store.index(scope).rebuild()
    # The checks after this one read the rebuilt index (bounded memory at any size), not
    # the store decoded from git that a disagreeing index sent them to.
    ctx.forget_view()


_NO_DERIVED = "doctor-noderived-blobs-v1"
"""Blob ids found without ``version``/``updated_at`` lines, kept between runs."""
_DERIVED_LINE = re.compile(rb"(?m)^(?:version|updated_at)[ \t]*:")


def _front_matter(data: bytes) -> bytes:
    """The front-matter of a memory file (roughly: between the opening and the closing
    ``---``), for a quick scan; empty when there is none."""
    start = 3 if data.startswith(b"---") else 6 if data.startswith(b"\xef\xbb\xbf---") else 0
    if not start:
        return b""
    end = re.search(rb"(?m)^---[ \t]*\r?$", data[start:])
    return data[start : start + end.start()] if end is not None else data[start:]


def check_schema(ctx: Context) -> Iterator[Finding]:
    for entry in _scan(ctx, _NO_DERIVED, lambda d: bool(_DERIVED_LINE.search(_front_matter(d)))):
        yield Finding(
            "schema",
            WARNING,
            f"{entry.id}'s file carries version or updated_at, which gitmem derives from "
            "history and never writes (readers ignore the line; docs/format.md)",
            fix=f"gitmem --store {ctx.where} edit {entry.id} and save: the write drops it",
            path=entry.path,
        )
    for path, message in ctx.problems():
        quoted = shlex.quote(path)
        fix = (
            f"repair the file by hand (its history: git -C {ctx.where} log -p -- {quoted}), "
            f"or remove it: git -C {ctx.where} rm -- {quoted} && git -C {ctx.where} commit"
        )
        if ctx.db.workdir is None:
            fix = f"in a clone of {ctx.where}: {fix.replace(f'-C {ctx.where} ', '')}, then push"
        memory_id = id_from_path(path)
        if OVER_READ_LIMIT in message and memory_id is not None:
            # Never read, so never repaired: only removing it from history frees every clone.
            fix = f"gitmem --store {ctx.where} purge {memory_id} --apply (then its printed steps)"
        yield Finding("schema", ERROR, message, fix=fix, path=path)


_NO_MARKERS = "doctor-nomarker-blobs-v1"
"""Blob ids found without conflict markers, kept between runs (as the secrets check's)."""


def check_markers(ctx: Context) -> Iterator[Finding]:
    """Memories whose committed text holds conflict markers: a plain ``git merge`` without
    the driver stopped on them and someone ran ``git add && git commit``. Nothing is lost
    yet (both sides' text is inside the markers), but readers see the markers."""

    def has_markers(data: bytes) -> bool:
        starts = re.search(rb"(?m)^<{7}(?: |$)", data)
        return starts is not None and bool(re.search(rb"(?m)^>{7}(?: |$)", data[starts.end() :]))

    for entry in _scan(ctx, _NO_MARKERS, has_markers, step=True):
        yield Finding(
            "markers",
            WARNING,
            f"{entry.id} holds conflict markers (<<<<<<< ... >>>>>>>) committed by a merge made "
            "without gitmem's merge driver: both sides' text is inside them",
            fix=(
                f"gitmem --store {ctx.where} show {entry.id}; write the merged text with "
                f"gitmem --store {ctx.where} update {entry.id} (gitmem history {entry.id} has "
                "each side's version)"
            ),
            path=entry.path,
        )


def _scan(
    ctx: Context, cache_name: str, hit: Callable[[bytes], bool], *, step: bool = False
) -> list[Entry]:
    """The current memories whose file ``hit`` finds something in, by id; blobs found
    clean are remembered between runs in ``cache_name`` (a blob never changes)."""
    found: list[Entry] = []
    repo = ctx.db.repo
    with _CleanBlobs(ctx.db.state_dir / cache_name, secrets_mod.DEFAULT_POLICY) as cache:
        for entry in ctx.facts().by_blob():
            if step:
                ctx.tally.step()
            if not entry.blob:
                continue
            if cache.known(entry.blob):
                cache.keep(entry.blob)
                continue
            if hit(blob_data(repo, pygit2.Oid(hex=entry.blob))):
                found.append(entry)
            else:
                cache.keep(entry.blob)
    return sorted(found, key=lambda e: e.id)


def check_twins(ctx: Context) -> Iterator[Finding]:
    """Memory files whose paths differ only in case: made on two clones (``notes/Alice``
    and ``notes/alice``), they merge as two files, and a case-insensitive file system
    (macOS, Windows) checks out only one of them, so edits there land on the wrong one."""
    tip = ctx.db.tip()
    twins = sorted(case_twins(ctx.db.repo, tip.tree if tip is not None else None))
    for paths in twins:
        ids = [id_from_path(p) or p for p in paths]
        yield Finding(
            "twins",
            WARNING,
            f"{' and '.join(paths)} differ only in case: a case-insensitive file system "
            "(macOS, Windows) holds only one of them",
            fix=(
                f"gitmem --store {ctx.where} show each ({', '.join(ids)}), merge the content "
                f"into one (gitmem update), then gitmem rm the other"
            ),
            path=paths[0],
        )


def check_links(ctx: Context) -> Iterator[Finding]:
    facts = ctx.facts()
    entries = facts.linking_out()
    targets = {t for e in entries for t in (e.supersedes, *(r for r, _ in e.related)) if t}
    ids = facts.existing(targets)
    # A link may point into the other store of a combined view.
    for other, peer in ctx.peers.items():
        if other != ctx.scope and targets - ids:
            with contextlib.suppress(GitmemError):
                ids |= peer.facts().existing(targets - ids)
    for entry in entries:
        target = entry.supersedes
        if target and target not in ids:
            existed = ctx.ever_existed(target)
            yield Finding(
                "links",
                WARNING,
                f"{entry.id} supersedes {target}, which is "
                + ("deleted" if existed else "not in the store"),
                fix=(
                    f"gitmem --store {ctx.where} restore {target}"
                    if existed
                    else f"gitmem --store {ctx.where} edit {entry.id} (remove its supersedes line)"
                ),
                path=entry.path,
            )
        for related_id, relationship in entry.related:
            if related_id in ids or related_id == target:
                continue
            yield Finding(
                "links",
                WARNING,
                f"{entry.id} is related ({relationship}) to {related_id}, which is not "
                "in the store",
                fix=f"gitmem --store {ctx.where} edit {entry.id} (drop the link), or "
                f"gitmem --store {ctx.where} restore {related_id} if it was deleted",
                path=entry.path,
            )


def check_chains(ctx: Context) -> Iterator[Finding]:
    facts = ctx.facts()
    members = facts.in_chains()
    by_id = {e.id: e for e in members}
    for cycle in _cycles(members, by_id):
        first = min(cycle)
        yield Finding(
            "chains",
            ERROR,
            "version chain cycle: " + " -> ".join([*cycle, cycle[0]]) + " (each supersedes "
            "the next, so none is the latest)",
            fix=f"gitmem --store {ctx.where} edit {first} (remove its supersedes line)",
            path=by_id[first].path,
        )
    for old_id, names in facts.forks():
        yield Finding(
            "chains",
            WARNING,
            f"version-chain fork: {old_id} is superseded by {len(names)} memories "
            f"({', '.join(names)}); readers follow the newest",
            fix=(
                f"gitmem --store {ctx.where} history {old_id}; merge the content into one "
                f"(gitmem update), then gitmem rm the other(s)"
            ),
            path=facts.path_of(old_id),
        )


def _cycles(entries: Sequence[Entry], by_id: dict[str, Entry]) -> Iterator[list[str]]:
    """Each ``supersedes`` cycle once, rotated to begin at its smallest id, in the order
    the oldest memory leading into it comes (each memory supersedes at most one, so every
    chain is a path that ends, or runs into exactly one cycle: one pass over all)."""
    done: set[str] = set()
    for entry in entries:
        path: list[str] = []
        on_path: set[str] = set()
        current: Entry | None = entry
        while current is not None and current.id not in done and current.id not in on_path:
            path.append(current.id)
            on_path.add(current.id)
            current = by_id.get(current.supersedes) if current.supersedes else None
        if current is not None and current.id in on_path:
            cycle = path[path.index(current.id) :]
            pivot = cycle.index(min(cycle))
            yield cycle[pivot:] + cycle[:pivot]
        done.update(path)


def memory_secrets(ctx: Context) -> Iterator[tuple[Entry, list[secrets_mod.SecretFinding]]]:
    policy = secrets_mod.policy_from_config(ctx.store.config(ctx.scope).raw)
    repo = ctx.db.repo
    found: list[tuple[Entry, list[secrets_mod.SecretFinding]]] = []
    with _CleanBlobs(ctx.db.state_dir / CLEAN_BLOBS, policy) as cache:
        for entry in ctx.facts().by_blob():
            ctx.tally.step()
            if not entry.blob:
                continue
            if cache.known(entry.blob):
                cache.keep(entry.blob)  # scanned clean under this policy by an earlier run
                continue
            findings = secrets_mod.scan_memory_bytes(
                blob_data(repo, pygit2.Oid(hex=entry.blob)), policy
            )
            if findings:
                found.append((entry, findings))
            else:
                cache.keep(entry.blob)
    yield from sorted(found, key=lambda item: item[0].id)


CLEAN_BLOBS = "doctor-clean-blobs"


class _CleanBlobs:
    """Blob ids a credential scan found clean, kept between runs (a derived cache, like
    the index: deleting it only costs one full scan).

    A blob's content never changes, so a blob clean once is clean again under the same
    policy and the same scanner; the file's first line is a digest of both (the policy's
    patterns and allow-list, and the source of :mod:`gitmem.format.secrets`), and a file made
    under another is ignored. Only the blobs of current memories are kept.

    The ids are kept sorted, and a run asks about blobs in that order (the index's rows by
    blob): the old file is read as one stream beside them and the new one written the same
    way, so neither set is ever in memory (at 1M memories each was ~100 MB). A run that
    keeps exactly what the file had leaves the file as it was.
    """

    def __init__(self, path: Path, policy: secrets_mod.SecretPolicy) -> None:
        self.path = path
        digest = hashlib.sha256(repr(policy).encode("utf-8", "surrogateescape"))
        with contextlib.suppress(OSError):
            digest.update(Path(secrets_mod.__file__).read_bytes())
        self.key = digest.hexdigest()
        self._old: IO[str] | None = None
        self._next: str | None = None
        self._old_digest = hashlib.sha256()
        self._new_digest = hashlib.sha256()
        self._last: str | None = None
        self._tmp = temp_path(self.path)
        self._out: IO[str] | None = None

    def __enter__(self) -> _CleanBlobs:
        with contextlib.suppress(OSError, UnicodeDecodeError):
            old = self.path.open(encoding="ascii")
            if old.readline().rstrip("\n") == self.key:
                self._old = old
                self._advance()
            else:
                old.close()
        # A store that cannot be written (read-only, another user's) is scanned every run.
        with contextlib.suppress(OSError):
            fd = os.open(self._tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            self._out = os.fdopen(fd, "w", encoding="ascii")
            self._out.write(self.key + "\n")
        return self

    def _advance(self) -> None:
        line = self._old.readline() if self._old is not None else ""
        try:
            self._next = line.rstrip("\n") if line else None
        except UnicodeDecodeError:
            self._next = None
        if self._next is not None:
            self._old_digest.update(line.encode("ascii"))

    def known(self, blob: str) -> bool:
        """Whether ``blob`` was found clean before; blobs must be asked about in order."""
        while self._next is not None and self._next < blob:
            self._advance()
        return self._next == blob

    def keep(self, blob: str) -> None:
        """``blob`` is clean: the new file keeps it (blobs in order; repeats kept once)."""
        if blob == self._last:
            return
        self._last = blob
        self._new_digest.update(f"{blob}\n".encode("ascii"))
        if self._out is not None:
            self._out.write(blob + "\n")

    def __exit__(self, *exc: object) -> None:
        while self._next is not None:
            self._advance()
        if self._old is not None:
            self._old.close()
        if self._out is None:
            return
        self._out.close()
        same = self._old is not None and self._old_digest.digest() == self._new_digest.digest()
        with contextlib.suppress(OSError):
            if exc[0] is None and not same:
                os.replace(self._tmp, self.path)
        with contextlib.suppress(OSError):
            self._tmp.unlink()


def check_secrets(ctx: Context) -> Iterator[Finding]:
    for entry, findings in memory_secrets(ctx):
        kinds = ", ".join(f"{f.kind} (line {f.line})" for f in findings)
        yield Finding(
            "secrets",
            WARNING,
            f"{entry.id} holds what looks like a credential: {kinds}",
            fix=(
                f"gitmem --store {ctx.where} edit {entry.id} to remove it, and rotate the "
                "credential: it stays in git history"
            ),
            path=entry.path,
        )
