"""Health checks of the memories: the index against git, the schema, conflict markers,
case twins, links, version chains and credentials (``gitmem doctor``)."""

from __future__ import annotations

import contextlib
import re
import shlex
import sqlite3
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

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
    damaged_finding,
    memory_files,
)
from gitmem.format import secrets as secrets_mod
from gitmem.format.layout import id_from_path
from gitmem.format.model import Memory
from gitmem.git.objects import OVER_READ_LIMIT, blob_data, get_commit
from gitmem.store import memory_versions
from gitmem.store.commit_changes import changed_memory_files
from gitmem.store.index_queries import problem_rows


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
    try:
        if isinstance(ctx._view, Exception):
            raise ctx._view
        assert view is not None
        if ctx.deep:
            message = _deep_disagreement(ctx)
        else:
            stale = _check_content(ctx, view) if view.agrees else view.stale
            message = _disagreement(view.missing, view.extra, stale, len(view.problem_diff))
    except (RepositoryDamagedError, KeyError, pygit2.GitError) as exc:
        # git's objects are damaged, not the index: a rebuild would fail the same way.
        yield damaged_finding("index", ctx, exc)
        return
    except Exception as exc:  # any other failure of the derived index is a finding
        message = f"the index cannot be read ({type(exc).__name__}: {exc})"
    if message:

        def rebuild() -> None:
            ctx.store.index(ctx.scope).rebuild()
            ctx.forget_view()  # the checks after this one read the rebuilt index

        yield Finding(
            "index",
            WARNING,
            message,
            fix=f"gitmem --store {ctx.where} reindex",
            safe=True,
            apply=rebuild,
        )


def _check_content(ctx: Context, view: IndexView) -> list[str]:
    """Ids among a spread sample of rows whose fields differ from their file decoded from
    git. Matching blob ids say each row was made from the right file; this says it was
    made right (and catches a tampered row) without decoding the whole store."""
    index = ctx.store.index(ctx.scope)
    differ = []
    decoded: dict[str, Memory | None] = {}
    for path, blob in view.sample.items():
        try:
            decoded[path] = index.decode(blob_data(ctx.db.repo, pygit2.Oid(hex=blob)), path)
        except RepositoryDamagedError:
            raise  # the object, not the row, is wrong: reported as damage, not as staleness
        except GitmemError:
            differ.append(id_from_path(path) or "")
    # The rows hold the version and updated_at derived from history: one walk for all.
    commit = get_commit(ctx.db.repo, view.commit) if view.commit is not None else None
    for path, memory in memory_versions.as_read(ctx.db.repo, commit, decoded).items():
        indexed = index.memory(id_from_path(path) or "")
        if memory is None or indexed is None or _fields(indexed) != _fields(memory):
            differ.append(id_from_path(path) or "")
    if differ:
        # The rows were read one by one: a write since the view may have changed one.
        now = ctx.db.snapshot()
        changed = {
            id_from_path(p) for p, blob in view.sample.items() if str(now.blob_id(p)) != blob
        }
        differ = [i for i in differ if i not in changed]
    return sorted(differ)


def _fields(memory: Memory) -> dict[str, Any]:
    return {k: v for k, v in memory.to_dict().items() if k != "store_scope"}


def _deep_disagreement(ctx: Context) -> str:
    """Every index row compared, column by column, with the row a rebuild from git makes
    (:meth:`Context.rebuilt`, at the commit the view compared)."""
    rebuilt = ctx.rebuilt()
    with ctx.store.index(ctx.scope).reading() as ours, rebuilt.reading() as fresh:
        commit = dict(ours.execute("SELECT key, value FROM meta")).get("commit") or None
        columns = [str(r[1]) for r in ours.execute("PRAGMA table_info(memories)")]
        names = ", ".join(
            f'"{c}"' for c in ["id", *(c for c in columns if c not in ("id", "rowid"))]
        )
        mine, theirs = (
            {r[0]: hash(r) for r in conn.execute(f"SELECT {names} FROM memories")}
            for conn in (ours, fresh)
        )
        problems = {p for p, _ in problem_rows(ours)} ^ {p for p, _ in problem_rows(fresh)}
    missing = sorted(theirs.keys() - mine.keys())
    extra = sorted(mine.keys() - theirs.keys())
    differ = sorted(i for i in mine.keys() & theirs.keys() if mine[i] != theirs[i])
    if commit != rebuilt.commit:
        # A write since the view moved the store's index on: the memories it changed are
        # not told apart from damage, so they are left out.
        repo = ctx.db.repo
        before, after = (get_commit(repo, c).tree if c else None for c in (rebuilt.commit, commit))
        changed = changed_memory_files(repo, before, after) if after is not None else []
        moved = {id_from_path(path) for path, _ in changed}
        missing, extra, differ = (
            [i for i in ids if i not in moved] for ids in (missing, extra, differ)
        )
        problems = set()
    return _disagreement(missing, extra, differ, len(problems))


def _disagreement(missing: list[str], extra: list[str], stale: list[str], problems: int) -> str:
    parts = [
        f"{len(ids)} {label} ({', '.join(ids[:3])}{', ...' if len(ids) > 3 else ''})"
        for label, ids in (("missing", missing), ("not in git", extra), ("stale", stale))
        if ids
    ]
    if problems:
        parts.append(f"{problems} unreadable file(s) seen differently")
    return "the index disagrees with git: " + "; ".join(parts) if parts else ""


_DERIVED_LINE = re.compile(  # in the front-matter: before the line that closes it
    rb"\A(?:\xef\xbb\xbf)?---(?:(?!^---[ \t]*\r?$).)*?^(?:version|updated_at)[ \t]*:", re.S | re.M
)


def check_schema(ctx: Context) -> Iterator[Finding]:
    for entry, _ in _scan(ctx, _DERIVED_LINE.match):
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


def has_markers(data: bytes) -> bool:
    starts = re.search(rb"(?m)^<{7}(?: |$)", data)
    return starts is not None and bool(re.search(rb"(?m)^>{7}(?: |$)", data[starts.end() :]))


def check_markers(ctx: Context) -> Iterator[Finding]:
    """Memories whose committed text holds conflict markers: a plain ``git merge`` without
    the driver stopped on them and someone ran ``git add && git commit``. Nothing is lost
    yet (both sides' text is inside the markers), but readers see the markers."""
    for entry, _ in _scan(ctx, has_markers):
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


T = TypeVar("T")


def _scan(ctx: Context, find: Callable[[bytes], T]) -> list[tuple[Entry, T]]:
    """The memories whose file ``find`` finds something in, with it, by id."""
    repo = ctx.db.repo
    found = ((e, find(blob_data(repo, pygit2.Oid(hex=e.blob)))) for e in ctx.entries() if e.blob)
    return sorted(((entry, hit) for entry, hit in found if hit), key=lambda item: item[0].id)


def check_twins(ctx: Context) -> Iterator[Finding]:
    """Memory files whose paths differ only in case: made on two clones (``notes/Alice``
    and ``notes/alice``), they merge as two files, and a case-insensitive file system
    (macOS, Windows) checks out only one of them, so edits there land on the wrong one."""
    tip = ctx.db.tip()
    groups: dict[str, list[str]] = {}
    for path in memory_files(ctx.db, str(tip.id) if tip is not None else None):
        groups.setdefault(path.casefold(), []).append(path)
    for paths in sorted(sorted(group) for group in groups.values() if len(group) > 1):
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
    entries = ctx.entries()
    links = {t for e in entries for t in (e.supersedes, *(r for r, _ in e.related)) if t}
    dangling = links - {e.id for e in entries}
    for other, peer in ctx.peers.items():
        if other != ctx.scope and dangling:  # a link may point into the other store
            with contextlib.suppress(GitmemError, sqlite3.Error):
                dangling -= {e.id for e in peer.entries()}
    for entry in entries:
        target = entry.supersedes
        if target in dangling:
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
            if related_id not in dangling or related_id == target:
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
    entries = ctx.entries()
    by_id = {e.id: e for e in entries}
    for cycle in _cycles(entries, by_id):
        first = min(cycle)
        yield Finding(
            "chains",
            ERROR,
            "version chain cycle: " + " -> ".join([*cycle, cycle[0]]) + " (each supersedes "
            "the next, so none is the latest)",
            fix=f"gitmem --store {ctx.where} edit {first} (remove its supersedes line)",
            path=by_id[first].path,
        )
    successors: dict[str, list[str]] = {}
    for entry in entries:
        if entry.supersedes:
            successors.setdefault(entry.supersedes, []).append(entry.id)
    for old_id, names in sorted(successors.items()):
        if len(names) < 2:
            continue
        yield Finding(
            "chains",
            WARNING,
            f"version-chain fork: {old_id} is superseded by {len(names)} memories "
            f"({', '.join(sorted(names))}); readers follow the newest",
            fix=(
                f"gitmem --store {ctx.where} history {old_id}; merge the content into one "
                f"(gitmem update), then gitmem rm the other(s)"
            ),
            path=by_id[old_id].path if old_id in by_id else None,
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


def memory_secrets(ctx: Context) -> list[tuple[Entry, list[secrets_mod.SecretFinding]]]:
    """The memories holding what looks like a credential under the store's policy."""
    policy = secrets_mod.policy_from_config(ctx.store.config(ctx.scope).raw)
    return _scan(ctx, lambda data: secrets_mod.scan_memory_bytes(data, policy))


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
