"""Format versions and ``gitmem migrate``: a store's layout changed once, in one commit.

``gitmem.yaml`` says which format a store is written in (``format: N``; a store that says
nothing is format 1). This gitmem reads and writes up to :data:`~gitmem.format.config.FORMAT`
and refuses a newer store rather than misread it (:class:`UnsupportedFormatError`, at open
and when a sync brings one in). :func:`migrate` brings an older store up, one registered
step per version, each step one commit that also raises ``format:``: the branch moves by
compare-and-swap, so a kill at any moment leaves the old state or the new one, and a
second run finds nothing to do.

Format 4: a plain id's file lives at ``memories/a/b/c/d/<id>.md`` (four folders of one hex
digit) instead of ``memories/<ab>/<id>.md``: at a million memories each of the 256 legacy
shards holds ~3,900 entries, and every create rewrote ~170 KB of trees (issue 17). The
step renames each file, its blob unchanged, so git's exact-rename detection carries a
teammate's edit of the old path over, and histories follow an id across both paths
(gitmem.store.derived, gitmem.git.diff.memory_blob).

Format 2: the knowledge graph's entity files live in hash shards,
``entities/<type>/<xx>/<name>.md`` (issue 14: a flat folder of 10k entities made every
write rewrite and every catch-up read a 10k-entry tree). Format 1 stores may still hold
``entities/<type>/<name>.md``; the graph reads both, and ``gitmem migrate`` moves them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import pygit2

from gitmem.base.errors import GitmemError, InvalidInputError, StoreError
from gitmem.base.trailers import ID_TRAILER, IDS_UNLISTED_TRAILER, OP_TRAILER, CommitSpec
from gitmem.format import codec, memfile
from gitmem.format.config import FORMAT, StoreConfig
from gitmem.format.layout import (
    CONFIG_FILE,
    MEMORIES_DIR,
    MEMORY_SUFFIX,
    fanout_path,
    id_from_path,
    is_path_id,
)
from gitmem.git.diff import REGULAR_MODES, TREE_MODE, tree_entries
from gitmem.git.objects import Snapshot, Staged, build_tree, get_tree
from gitmem.store.core import ID_TRAILERS, Store
from gitmem.store.graphindex import ENTITIES_ROOT, entity_fields, is_entity_path

MIGRATE_OP = "migrate"
MOVED_LISTED = 1_000
"""Moves a :class:`Migration` lists (and its commit names in ``Gitmem-Id`` trailers); the
rest are counted: the step to format 4 moves every memory, a million in a large store."""
MIGRATE_DEFAULT = 2
"""Where ``gitmem migrate`` takes a store without ``--to``. Not format 3, although new
stores are made at 3: in format 3 a file's ``version``/``updated_at`` lines stop being the
current values (docs/format.md), which a team reading files with other tools must choose,
so an existing store moves to 3 only when asked by name (``--to 3``)."""


@dataclass
class Migration:
    """What one step did (or, with ``dry_run``, would do) to one scope's repository."""

    scope: str
    from_format: int
    to_format: int
    moved: list[tuple[str, str]] = field(default_factory=list)
    """(old path, new path) of the first :data:`MOVED_LISTED` files the step moved."""
    moved_count: int = 0
    """How many files the step moved (all of them, listed or not)."""
    commit: str | None = None
    dry_run: bool = field(default=False, repr=False)
    """Whether the step only says what it would do (it writes no object then)."""

    def add(self, old: str, new: str) -> None:
        self.moved_count += 1
        if len(self.moved) < MOVED_LISTED:
            self.moved.append((old, new))

    def clear(self) -> None:
        self.moved.clear()
        self.moved_count = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": self.scope,
            "from_format": self.from_format,
            "to_format": self.to_format,
            "moved": [{"from": a, "to": b} for a, b in self.moved],
            "moved_count": self.moved_count,
            "commit": self.commit,
        }


Progress = Callable[[int, int], None]
Step = Callable[[Snapshot, Migration, Progress | None], None]
"""Stages one version's changes in a snapshot (the format line is raised by the caller),
calling ``progress(done, total)`` over the files it looks at, if given."""


def _shard_entities(snap: Snapshot, report: Migration, progress: Progress | None) -> None:
    """1 -> 2: each ``entities/<type>/<name>.md`` to ``entities/<type>/<shard>/<name>.md``.

    The file's id is its path, so the moved file gets its new id and names the old one in
    ``supersedes``: ``gitmem history`` of the entity follows the link back through the
    move. Name, type, observations and relations are kept (relations name entities, not
    files), so the graph reads the same entities before and after.
    """
    # Only entities/<type>/<name>.md: the sharded ones are already where they belong.
    flat = [
        path
        for path in sorted(snap.iter_files(ENTITIES_ROOT))
        if len(path.split("/")) == 3 and is_entity_path(path)
    ]
    if progress is not None:
        progress(0, len(flat))
    for done, path in enumerate(flat, 1):
        _shard_entity(snap, path, report)
        if progress is not None and (done % 100 == 0 or done == len(flat)):
            progress(done, len(flat))


def _shard_entity(snap: Snapshot, path: str, report: Migration) -> None:
    """One ``entities/<type>/<name>.md`` moved into its shard (see :func:`_shard_entities`)."""
    from gitmem.features.graph import shard_of

    parts = path.split("/")
    data = snap.read(path)
    if data is None:
        return
    try:
        memory = memfile.decode(data, path)
    except GitmemError as exc:
        raise StoreError(
            f"cannot migrate {path}: {exc}",
            hint="fix or remove the file (gitmem doctor), then run gitmem migrate again",
        ) from None
    entity = entity_fields(memory)
    folder, segment = parts[1], parts[2][: -len(".md")]
    target_id = f"{ENTITIES_ROOT}/{folder}/{shard_of(entity.name)}/{segment}"
    n = 2
    while snap.exists(f"{target_id}.md"):
        target_id = f"{ENTITIES_ROOT}/{folder}/{shard_of(entity.name)}/{segment}-{n}"
        n += 1
    moved = replace(memory, id=target_id, path=None, supersedes=memory.supersedes or memory.id)
    doc = memory.document
    metadata = moved.to_metadata()
    text = codec.serialize(
        doc.with_changes(metadata, moved.body)
        if doc is not None
        else codec.Document(metadata, moved.body)
    )
    snap.remove(path)
    snap.put(f"{target_id}.md", text.encode("utf-8"))
    report.add(path, f"{target_id}.md")


def _derive_volatile(snap: Snapshot, report: Migration, progress: Progress | None) -> None:
    """2 -> 3: nothing to move. Each file keeps the ``version`` and ``updated_at`` it has,
    which format 3 reads as the stored base; this step's commit raises ``format:`` only, and
    writes after it count as bumps on top (gitmem.store.derived). No memory file changes,
    so the migration conflicts with no branch that edits memories."""
    if progress is not None:
        progress(0, 0)


def _fan_out(snap: Snapshot, report: Migration, progress: Progress | None) -> None:
    """3 -> 4: each plain id's ``memories/<ab>/<id>.md`` to ``memories/a/b/c/d/<id>.md``,
    renamed with its blob unchanged (no file is read or rewritten).

    Files that are not at a plain id's legacy path (a stray file, one that names another
    id's shard, a path id) stay where they are, as does a legacy file whose id is already
    at its format 4 path (readers read that one; doctor lists the other).

    The new ``memories/`` tree is built one legacy shard at a time and staged whole
    (:meth:`Snapshot.graft`): legacy shard ``ab`` holds exactly the ids whose 16-way path
    is under ``a/b/`` (both are the uuid's first hex digits, or the id's SHA-1's), so its
    files make the new ``a/b/`` folder, merged with what a format 4 write already put
    there, and only that folder's tree id is kept. Staging each rename instead held two
    entries per memory: 837 MiB at a million. The exception, an id
    like ``mem_ab-x`` (two hex digits, not four: legacy shard ``ab``, 16-way folders from
    its SHA-1), is held aside and put in its place with the rest at the end. A dry run
    writes no tree."""
    repo = snap.repo
    tree = snap.tree
    entry = tree[MEMORIES_DIR] if tree is not None and MEMORIES_DIR in tree else None
    if entry is None or entry.type_str != "tree":
        if progress is not None:
            progress(0, 0)
        return
    memories = get_tree(repo, entry.id)
    top = tree_entries(repo, entry.id)
    shards = [name for name, (mode, _) in top.items() if mode == TREE_MODE and len(name) == 2]
    if progress is not None:
        progress(0, len(shards))
    grafts: dict[str, pygit2.Oid] = {}
    changes: dict[str, Staged] = {}  # emptied shards, and the ids held aside
    for done, name in enumerate(shards, 1):
        folders: dict[str, dict[str, tuple[int, bytes]]] = {"": top}  # this shard's reads
        items = tree_entries(repo, pygit2.Oid(raw=top[name][1]))
        here = f"{name[0]}/{name[1]}"
        folder = None
        if _exists(repo, folders, here):
            mode, raw = folders[name[0]][name[1]]
            if mode != TREE_MODE:
                raise InvalidInputError(f"{MEMORIES_DIR}/{here} is a file where a folder goes")
            folder = get_tree(repo, pygit2.Oid(raw=raw))
        moved: dict[str, Staged] = {}  # below the new a/b/
        for file, (mode, raw) in items.items():
            if mode not in REGULAR_MODES or not file.endswith(MEMORY_SUFFIX):
                continue
            path = f"{MEMORIES_DIR}/{name}/{file}"
            memory_id = id_from_path(path)
            if memory_id is None or is_path_id(memory_id):
                continue
            target = fanout_path(memory_id)
            inside = target[len(MEMORIES_DIR) + 1 :]
            if _exists(repo, folders, inside):
                continue  # the id is at both paths: the format 4 file is the one read
            if inside.startswith(f"{here}/"):
                moved[inside[len(here) + 1 :]] = pygit2.Oid(raw=raw)
            else:
                changes[inside] = pygit2.Oid(raw=raw)
                changes[f"{name}/{file}"] = None
            report.add(path, target)
        if moved and not report.dry_run:
            grafts[here] = build_tree(repo, folder, moved)
            if len(moved) == len(items):
                changes[name] = None
            else:
                shard = get_tree(repo, pygit2.Oid(raw=top[name][1]))
                gone: dict[str, Staged] = {file: None for file in _names(moved)}
                grafts[name] = build_tree(repo, shard, gone)
        if progress is not None:
            progress(done, len(shards))
    if report.dry_run or not (grafts or changes):
        return
    snap.graft(MEMORIES_DIR, build_tree(repo, memories, changes, grafts))


def _exists(
    repo: pygit2.Repository, folders: dict[str, dict[str, tuple[int, bytes]]], path: str
) -> bool:
    """Whether ``path`` (below ``memories/``) is in the committed tree, its folders read
    once each into ``folders``. (A pygit2 lookup by path that misses keeps the path
    string alive: 85,000 of them at 100k.)"""
    folder, _, name = path.rpartition("/")
    entries = folders.get(folder)
    if entries is None:
        parent, _, last = folder.rpartition("/")
        if not _exists(repo, folders, folder) or folders[parent][last][0] != TREE_MODE:
            return False
        entries = folders[folder] = tree_entries(repo, pygit2.Oid(raw=folders[parent][last][1]))
    return name in entries


def _names(moved: dict[str, Staged]) -> Iterator[str]:
    """The file names of ``c/d/<name>`` paths."""
    return (path.rpartition("/")[2] for path in moved)


STEPS: dict[int, Step] = {1: _shard_entities, 2: _derive_volatile, 3: _fan_out}
"""From format N to N+1. Every format below :data:`FORMAT` has its step."""


def _with_format(text: str, version: int) -> str:
    """``gitmem.yaml`` with ``format: version``, the rest of the text (comments) kept."""
    line = re.compile(r"^format:[^\n]*$", re.M)
    if line.search(text):
        return line.sub(f"format: {version}", text, count=1)
    lines = text.splitlines(keepends=True)
    at = next((i for i, item in enumerate(lines) if not item.startswith("#")), len(lines))
    lines.insert(at, f"format: {version}\n")
    return "".join(lines)


def migrate(
    store: Store,
    *,
    dry_run: bool = False,
    progress: Progress | None = None,
    to: int | None = None,
) -> list[Migration]:
    """Bring every scope of ``store`` up to format ``to`` (default :data:`MIGRATE_DEFAULT`;
    at most :data:`FORMAT`), one commit per step. A store already there or past it is left
    as it is.

    Returns what each step did (nothing for a store already there). ``dry_run`` stages the
    same changes and commits none. A work-tree store with uncommitted edits of a file to
    move is refused (DirtyWorktreeError), with nothing changed. ``progress(done, total)``
    follows each step over the files it looks at (from 0 to total, per step).
    """
    target = MIGRATE_DEFAULT if to is None else to
    if not 1 <= target <= FORMAT:
        raise StoreError(
            f"cannot migrate to format {target}: this gitmem knows formats 1 to {FORMAT}"
        )
    done: list[Migration] = []
    for scope in store.scopes:
        db = store.db(scope)
        while True:
            current = _format_at(db.snapshot())
            if current >= target:
                break
            report = Migration(str(scope), current, current + 1, dry_run=dry_run)

            def plan(
                snap: Snapshot, report: Migration = report, current: int = current
            ) -> tuple[CommitSpec, None]:
                report.clear()
                if _format_at(snap) != current:
                    return CommitSpec("nothing to migrate"), None  # someone else did it
                STEPS[current](snap, report, progress)
                config = snap.read(CONFIG_FILE)
                text = config.decode("utf-8") if config is not None else ""
                snap.put(CONFIG_FILE, _with_format(text, current + 1).encode("utf-8"))
                moved = report.moved_count
                # 3 -> 4 changes no memory (a rename of each file): its ids are not named,
                # as a write's are; the 1 -> 2 step gives entities new ids.
                ids = [
                    id_from_path(new) or new[: -len(".md")]
                    for _, new in (report.moved if current != 3 else [])
                ]
                trailers = [(OP_TRAILER, MIGRATE_OP), *((ID_TRAILER, i) for i in ids[:ID_TRAILERS])]
                if moved > len(ids[:ID_TRAILERS]):
                    trailers.append((IDS_UNLISTED_TRAILER, str(moved - len(ids[:ID_TRAILERS]))))
                return CommitSpec(
                    subject=f"migrate: format {current} to {current + 1} ({moved} files moved)",
                    trailers=trailers,
                ), None

            if dry_run:
                plan(db.snapshot())
                done.append(report)
                break
            # The write loop without group commit: the plan reads the whole entities tree,
            # so it must run again on whatever tip it lands on, never be re-based.
            _, oid = db.integrate(plan)
            report.commit = str(oid) if oid is not None else None
            done.append(report)
    return done


def _format_at(snap: Snapshot) -> int:
    data = snap.read(CONFIG_FILE)
    if data is None:
        return FORMAT  # an empty repository: nothing to migrate
    return StoreConfig.from_text(codec.decode(data, what=CONFIG_FILE)).format
