"""``gitmem migrate``: a store of formats 1-5 converted to the current one, one
``Gitmem-Op: migrate`` commit per scope: format 4's plain-id paths move to
``memories/<ab>/<id>.md``, ``version``/``updated_at`` lines go (derived from history),
format 1's entity files move into their shards as successors, ``format:`` is raised (5 to 6
changes only that). The branch moves by compare-and-swap: a kill leaves old or new.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from gitmem.base.errors import GitmemError, StoreError
from gitmem.base.trailers import IDS_UNLISTED_TRAILER, OP_TRAILER, CommitSpec
from gitmem.features.graph_rows import ENTITIES_ROOT, entity_fields, shard_of
from gitmem.format import codec, memfile
from gitmem.format.config import FORMAT, StoreConfig
from gitmem.format.layout import (
    CONFIG_FILE,
    MEMORY_ROOTS,
    id_from_path,
    is_memory_file,
    memory_path,
)
from gitmem.format.model import Op
from gitmem.git.objects import Snapshot
from gitmem.store.core import Store

MOVED_LISTED = 1_000

Progress = Callable[[int, int], None]


@dataclass
class Migration:
    """What the conversion did (with ``dry_run``: would do) to one scope: ``moved`` lists
    the first :data:`MOVED_LISTED` moves, ``moved_count`` counts them all; ``rewritten``
    files lost their ``version``/``updated_at`` lines."""

    scope: str
    from_format: int
    to_format: int = FORMAT
    moved: list[tuple[str, str]] = field(default_factory=list)
    moved_count: int = 0
    rewritten: int = 0
    notes: list[str] = field(default_factory=list)
    commit: str | None = None

    def add(self, old: str, new: str) -> None:
        self.moved_count += 1
        if len(self.moved) < MOVED_LISTED:
            self.moved.append((old, new))

    def clear(self) -> None:
        self.moved.clear()
        self.notes.clear()
        self.moved_count = self.rewritten = 0

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "moved": [{"from": a, "to": b} for a, b in self.moved]}


def _convert(snap: Snapshot, report: Migration, progress: Progress | None) -> None:
    """Stage the conversion of every memory file of ``snap`` (see the module's docstring)."""
    paths = [p for root in MEMORY_ROOTS for p in snap.iter_files(root) if is_memory_file(p)]
    taken = set(paths)
    if progress is not None:
        progress(0, len(paths))
    for done, path in enumerate(paths, 1):
        if path.startswith(f"{ENTITIES_ROOT}/") and path.count("/") == 2:  # entities/<type>/<name>
            _shard_entity(snap, path, report, taken)
        else:
            data = snap.read(path)
            memory_id = id_from_path(path, past=True)
            target = memory_path(memory_id) if memory_id is not None else path
            if data is not None:
                new = memfile.without_derived(data)
                if new != data:
                    report.rewritten += 1
                if target != path:
                    if target in taken:
                        report.notes.append(
                            f"{target} was not read (format 4 read {path}): replaced by it"
                        )
                    snap.remove(path)
                    report.add(path, target)
                if target != path or new != data:
                    snap.put(target, new)
        if progress is not None and (done % 500 == 0 or done == len(paths)):
            progress(done, len(paths))


def _shard_entity(snap: Snapshot, path: str, report: Migration, taken: set[str]) -> None:
    """One ``entities/<type>/<name>.md`` moved into its shard, as a new id that supersedes the
    old one (``gitmem history`` follows the move); the graph reads the same entity."""
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
    parts = path.split("/")
    folder, segment = parts[1], parts[2][: -len(".md")]
    target = f"{ENTITIES_ROOT}/{folder}/{shard_of(entity.name)}/{segment}"
    n = 2
    while f"{target}.md" in taken or snap.exists(f"{target}.md"):
        target = f"{ENTITIES_ROOT}/{folder}/{shard_of(entity.name)}/{segment}-{n}"
        n += 1
    moved = replace(memory, id=target, path=None, supersedes=memory.supersedes or memory.id)
    assert memory.document is not None  # a decoded memory keeps its file's document
    text = codec.serialize(memory.document.with_changes(moved.to_metadata(), moved.body))
    snap.remove(path)
    snap.put(f"{target}.md", text.encode("utf-8"))
    taken.add(f"{target}.md")
    report.rewritten += 1
    report.add(path, f"{target}.md")


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
    store: Store, *, dry_run: bool = False, progress: Progress | None = None
) -> list[Migration]:
    """Convert every scope of ``store`` (opened with ``any_format=True``) of an older format,
    one commit per scope (``dry_run``: none); uncommitted edits of a file to change refuse."""
    done: list[Migration] = []
    for scope in store.scopes:
        db = store.db(scope)
        current = _format_at(db.snapshot())
        if current >= FORMAT:
            continue
        report = Migration(str(scope), current)

        def plan(
            snap: Snapshot, report: Migration = report, current: int = current
        ) -> tuple[CommitSpec, None]:
            report.clear()
            if _format_at(snap) != current:
                return CommitSpec("nothing to migrate"), None  # someone else did it
            snap.write_blobs = not dry_run  # ids staged, not every file's bytes
            if current < 5:
                _convert(snap, report, progress)
            config = snap.read(CONFIG_FILE)
            text = config.decode("utf-8") if config is not None else ""
            snap.put(CONFIG_FILE, _with_format(text, FORMAT).encode("utf-8"))
            changed = sum(1 for p, d in snap.changes.items() if d is not None and p != CONFIG_FILE)
            trailers = [(OP_TRAILER, str(Op.MIGRATE))]
            if changed:
                trailers.append((IDS_UNLISTED_TRAILER, str(changed)))
            return CommitSpec(
                subject=f"migrate: format {current} to {FORMAT}",
                body=f"{report.moved_count} files moved, {report.rewritten} rewritten "
                "without their version and updated_at lines (docs/format.md).",
                trailers=trailers,
            ), None

        if dry_run:
            plan(db.snapshot())
        else:  # the plan reads the whole tree: it runs again on whatever tip it lands on
            _, oid = db.write(plan)
            report.commit = str(oid) if oid is not None else None
        done.append(report)
    return done


def _format_at(snap: Snapshot) -> int:
    data = snap.read(CONFIG_FILE)
    if data is None:
        return FORMAT  # an empty repository: nothing to migrate
    return StoreConfig.from_text(codec.decode(data, what=CONFIG_FILE)).format
