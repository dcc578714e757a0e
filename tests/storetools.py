"""Helpers for the store tests: branch tips, commit counts, files planted through the git binary.

Planting goes through the real ``git`` command in a work-tree store, the way a
person (or another tool) would put a file there, so the library sees exactly
what it would meet in the wild.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

from conftest import run_git

from gitmem import Scope, Store
from gitmem.features.graph import Entity, Graph

__all__ = ["run_git"]


def assert_progress(calls: list[tuple[int, int]]) -> None:
    """What a ``progress(done, total)`` callback saw is sensible: one total, ``done`` never
    going back and never past it, and the last call at ``done == total``."""
    assert calls, "progress was never called"
    totals = {total for _, total in calls}
    assert len(totals) == 1, f"the total changed: {sorted(totals)}"
    dones = [done for done, _ in calls]
    assert dones == sorted(dones), f"done went back: {dones}"
    assert all(0 <= done <= calls[0][1] for done in dones), calls
    assert calls[-1][0] == calls[-1][1], f"did not end at the total: {calls[-1]}"


def tip(store: Store, scope: Scope | str | None = None) -> str | None:
    """The commit id the store's branch points at (None for an empty repository)."""
    commit = store.db(scope).tip()
    return str(commit.id) if commit is not None else None


def commit_count(store: Store, scope: Scope | str | None = None) -> int:
    return int(run_git(store.db(scope).gitdir, "rev-list", "--count", "main").strip())


def blob_at(store: Store, path: str, rev: str = "main") -> str | None:
    """The blob id of ``path`` at ``rev`` according to the git binary, None if absent."""
    out = run_git(
        store.db().gitdir, "rev-parse", "--verify", "--quiet", f"{rev}:{path}", check=False
    )
    return out.strip() or None


def plant(store: Store, path: str, content: str | bytes, message: str = "hand edit") -> str:
    """Commit ``content`` at ``path`` with the git binary, as a person would; returns the commit.

    In a work-tree store the file is written and committed in place; a bare store
    gets it through a clone and a push.
    """
    db = store.db()
    if db.bare:
        root = db.gitdir.parent / f"{db.gitdir.name}-plant"
        if not root.exists():
            run_git(db.gitdir.parent, "clone", "-q", str(db.gitdir), str(root))
        run_git(root, "pull", "-q", "--ff-only")
    else:
        root = store.path
    full = root / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8"))
    run_git(root, "add", "--", path)
    run_git(root, "commit", "-q", "-m", message)
    if db.bare:
        run_git(root, "push", "-q", "origin", "HEAD:main")
    return run_git(root, "rev-parse", "HEAD").strip()


def plant_symlink(store: Store, path: str, target: str, message: str = "hand link") -> str:
    root = store.path
    full = root / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.symlink_to(target)
    run_git(root, "add", "--", path)
    run_git(root, "commit", "-q", "-m", message)
    return run_git(root, "rev-parse", "HEAD").strip()


def memory_text(
    memory_id: str,
    body: str = "planted body\n",
    *,
    supersedes: str | None = None,
    extra: str = "",
) -> str:
    """A valid memory file, written by hand the way a person would."""
    lines = ["---", f"id: {memory_id}", "title: planted", "created_at: 2026-11-22T09:00:00Z"]
    if supersedes is not None:
        lines.append(f"supersedes: {supersedes}")
    text = "\n".join(lines) + "\n" + extra + "---\n\n" + body
    return text


def status_porcelain(store: Store) -> str:
    return run_git(store.path, "status", "--porcelain", "--untracked-files=all")


def table_bytes(conn: Any) -> dict[str, int]:
    """Bytes on disk of each table of an SQLite file (``dbstat``; checkpoint first), its
    indexes counted with it and an FTS table's shadow tables (``fts_data``...) with ``fts``."""
    owner = dict(conn.execute("SELECT name, tbl_name FROM sqlite_master"))
    out: dict[str, int] = {}
    for name, size in conn.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name"):
        table = owner.get(name, name)
        if table.startswith("fts_"):
            table = "fts"
        out[table] = out.get(table, 0) + int(size)
    return out


# -- stores of an older format, written with git alone (gitmem init makes the current one) --

OLD_T0 = 1_795_000_000
"""Author time (seconds) of an old store's first commit."""


def _old_path(memory_id: str, fmt: int) -> str:
    from gitmem.format.layout import format4_path, memory_path

    found = format4_path(memory_id) if fmt == 4 else None
    return found or memory_path(memory_id)


def _old_file(
    memory_id: str, title: str, created: int, updated: int, version: int, body: str
) -> str:
    from gitmem.base.clock import format_timestamp

    def stamp(t: int) -> str:
        return format_timestamp(dt.datetime.fromtimestamp(t, dt.UTC))

    return (
        f"---\nid: {memory_id}\ntitle: {title}\nscope: repo\ncreated_at: {stamp(created)}\n"
        f"updated_at: {stamp(updated)}\nversion: {version}\n---\n\n{body}"
    )


def old_store(
    path: Path, fmt: int, *, bare: bool = False, memories: int = 3, bulk: int = 0
) -> dict[str, Any]:
    """A store as a gitmem of format ``fmt`` (1-4) left it, made with the git binary: an
    init commit, ``memories`` creates (one commit each, a minute apart), then two updates
    of the first memory (formats 1-2 rewrite its version/updated_at lines, 3-4 leave them
    as created), each file where that format put it; ``bulk`` more memories come in one
    last commit; format 1 also holds one knowledge-graph entity at its flat path. Returns
    ``ids``, ``versions`` (the commits of each memory's history that made a version) and
    ``updated`` (the newest one's author time)."""
    import uuid

    work = path if not bare else path.with_name(path.name + "-work")
    work.mkdir(parents=True)
    run_git(work, "init", "-q", "-b", "main")

    def commit(when: int, op: str, subject: str) -> None:
        run_git(work, "add", "-A")
        env = {"GIT_AUTHOR_DATE": f"@{when} +0000", "GIT_COMMITTER_DATE": f"@{when} +0000"}
        saved = {k: os.environ.get(k) for k in env}
        os.environ.update(env)
        try:
            run_git(work, "commit", "-q", "--no-verify", "-m", f"{subject}\n\nGitmem-Op: {op}")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v

    def write(rel: str, text: str) -> None:
        target = work / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)

    config = "# gitmem store configuration\n"
    config += (
        f"format: {fmt}\n" if fmt > 1 else ""
    ) + "scope: repo\nlimits:\n  max_body_bytes: 1048576\n"
    write("gitmem.yaml", config)
    write(".gitattributes", "*.md merge=gitmem\n")
    commit(OLD_T0, "init", "init: gitmem store")
    ids = [f"mem_{uuid.UUID(int=i * 7919 + 1, version=4)}" for i in range(memories)]
    for i, memory_id in enumerate(ids):
        when = OLD_T0 + 60 * (i + 1)
        write(
            _old_path(memory_id, fmt), _old_file(memory_id, f"m{i}", when, when, 1, f"body {i}\n")
        )
        commit(when, "create", f"create: m{i}")
    created = OLD_T0 + 60
    for n, when in enumerate((OLD_T0 + 600, OLD_T0 + 1200), 2):
        stored = (when, n) if fmt <= 2 else (created, 1)
        text = _old_file(ids[0], "m0", created, stored[0], stored[1], f"body 0, take {n}\n")
        write(_old_path(ids[0], fmt), text)
        commit(when, "update", "update: m0")
    versions = {memory_id: 1 for memory_id in ids}
    versions[ids[0]] = 3
    updated = {memory_id: OLD_T0 + 60 * (i + 1) for i, memory_id in enumerate(ids)}
    updated[ids[0]] = OLD_T0 + 1200
    if fmt == 1:
        entity = (
            "---\nid: entities/person/ada\ncreated_at: 2026-11-22T10:00:00Z\n"
            "updated_at: 2026-11-22T10:00:00Z\nversion: 1\nname: Ada\nentity_type: person\n"
            "---\n\n- wrote the first program\n"
        )
        write("entities/person/ada.md", entity)
        commit(OLD_T0 + 1800, "create", "create: Ada")
    if bulk:
        more = [f"mem_{uuid.UUID(int=10**6 + i, version=4)}" for i in range(bulk)]
        for i, memory_id in enumerate(more):
            text = _old_file(memory_id, f"b{i}", OLD_T0 + 2400, OLD_T0 + 2400, 1, f"bulk {i}\n")
            write(_old_path(memory_id, fmt), text)
        commit(OLD_T0 + 2400, "transaction", f"import: {bulk}")
        ids += more
        versions.update((memory_id, 1) for memory_id in more)
        updated.update((memory_id, OLD_T0 + 2400) for memory_id in more)
    if bare:
        run_git(path.parent, "clone", "-q", "--bare", str(work), str(path))
    return {"ids": ids, "versions": versions, "updated": updated, "path": path}


def entity(graph: Graph, name: str) -> Entity | None:
    """The entity called ``name`` (the oldest file's, if a hand edit made two)."""
    found = graph.open_nodes([name]).entities
    return found[0] if found else None
