"""Import and export in three formats: ``mcp-jsonl`` (the reference MCP knowledge-graph
server's ``memory.jsonl``), ``files`` (memory files as they are, per scope) and ``forge`` (a
Forge plugin memory folder). An import is one commit (all or nothing); both end with a
:class:`Fidelity` report that checks every entry against what was written.
"""

from __future__ import annotations

import datetime as dt
import errno
import json
import os
import stat
from collections.abc import Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from gitmem.base.clock import FixedClock
from gitmem.base.errors import (
    AlreadyExistsError,
    GitmemError,
    InvalidInputError,
    InvalidMemoryError,
)
from gitmem.base.trailers import ID_TRAILER, OP_TRAILER, CommitSpec
from gitmem.features.graph import Entity, Graph, Relation, to_entity, to_relation
from gitmem.features.layers import LAYER_ROOTS, layer_fields
from gitmem.format import codec, memfile
from gitmem.format.layout import (
    MEMORY_SUFFIX,
    check_id,
    id_from_path,
    is_path_id,
    memory_path,
)
from gitmem.format.model import Memory, Scope, Trigger
from gitmem.git.db import GitDB
from gitmem.git.objects import Snapshot
from gitmem.store import memory_versions
from gitmem.store.core import Store

Progress = Callable[[int, int], None]  # progress(done, total), as entries are written


@dataclass
class Fidelity:
    """What an import or export did, and whether every entry arrived intact."""

    operation: str
    source: str
    read: dict[str, int] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    unchanged: dict[str, int] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # done differently from the source
    mismatches: list[str] = field(default_factory=list)
    checked: int = 0
    commit: str | None = None

    @property
    def ok(self) -> bool:
        return not self.mismatches

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "ok": self.ok}

    def summary(self) -> str:
        def counts(d: Mapping[str, int]) -> str:
            return ", ".join(f"{n} {k}" for k, n in d.items()) or "nothing"

        lines = [
            f"{self.operation} {self.source}",
            f"  read:      {counts(self.read)}",
            f"  written:   {counts(self.written)}",
        ]
        if any(self.unchanged.values()):
            lines.append(f"  unchanged: {counts(self.unchanged)} (already there, identical)")
        lines.extend(f"  skipped:   {reason}" for reason in self.skipped)
        lines.extend(f"  note:      {note}" for note in self.notes)
        verdict = "every entry matches" if self.ok else f"{len(self.mismatches)} MISMATCHES"
        lines.append(f"  checked:   {self.checked} entries, {verdict}")
        lines.extend(f"  mismatch:  {m}" for m in self.mismatches)
        if self.commit:
            lines.append(f"  commit:    {self.commit[:10]}")
        return "\n".join(lines)


def parse_mcp_jsonl(text: str) -> tuple[list[tuple[int, Entity | Relation]], list[str]]:
    """The entities and relations of a reference-server file with their line numbers, and
    its bad lines (``line N: why``); blank lines are skipped, as the reference does."""
    entries: list[tuple[int, Entity | Relation]] = []
    bad: list[str] = []
    text = text.removeprefix(codec.BOM)  # an editor's byte-order mark is not part of line 1
    for number, raw in enumerate(text.split("\n"), 1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except ValueError as exc:  # a number too long to convert is no JSONDecodeError
            why = (
                f"{exc.msg} at column {exc.colno}" if isinstance(exc, json.JSONDecodeError) else exc
            )
            bad.append(f"line {number}: not JSON ({why})")
            continue
        if not isinstance(value, dict):
            bad.append(f"line {number}: not a JSON object")
            continue
        kind = value.get("type")
        try:
            if kind == "entity":
                entries.append((number, to_entity(value, "entity")))
            elif kind == "relation":
                entries.append((number, to_relation(value, "relation")))
            else:
                bad.append(f"line {number}: type is {kind!r}, not 'entity' or 'relation'")
        except InvalidInputError as exc:
            bad.append(f"line {number}: {exc.message}")
    return entries, bad


def _empty_folder(dest: str | Path) -> Path:
    target = Path(dest)
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidInputError(f"{target} exists and is not an empty directory")
    return target


def _read_text(path: Path) -> str:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidInputError(f"cannot read file {path}: {exc.strerror}") from None
    return codec.decode(data, what=str(path))


def import_mcp_jsonl(
    store: Store,
    path: str | Path,
    *,
    skip_bad: bool = False,
    agent: str | None = None,
    progress: Progress | None = None,
    batch_size: int = 20_000,
) -> Fidelity:
    """Import a reference-server ``memory.jsonl`` into the knowledge graph, one commit per
    ``batch_size`` entries; a bad line stops it unless ``skip_bad``. Entities already in
    the store keep their type and gain the observations they lack."""
    path = Path(path)
    entries, bad = parse_mcp_jsonl(_read_text(path))
    if bad and not skip_bad:
        more = f" (and {len(bad) - 1} more bad lines)" if len(bad) > 1 else ""
        raise InvalidInputError(
            f"{path}: {bad[0]}{more}; nothing was imported",
            hint="fix the line, or pass --skip-bad to import the rest",
        )
    report = Fidelity("import mcp-jsonl", str(path), skipped=bad)
    entities: dict[str, Entity] = {}
    relations: dict[tuple[str, str, str], Relation] = {}
    for line, item in entries:
        if isinstance(item, Entity):
            if item.name in entities:
                first = entities[item.name]
                merged = tuple(dict.fromkeys([*first.observations, *item.observations]))
                entities[item.name] = Entity(item.name, first.entity_type, merged)
                report.skipped.append(
                    f"line {line}: entity {item.name!r} appears again; "
                    "its observations were merged into the first"
                )
            else:
                entities[item.name] = item
        elif item.key in relations:
            report.skipped.append(f"line {line}: the same relation again")
        else:
            relations[item.key] = item
    report.read = {
        "entities": sum(isinstance(item, Entity) for _, item in entries),
        "relations": sum(isinstance(item, Relation) for _, item in entries),
    }
    graph = Graph(store, agent=agent)
    before = graph.read_graph()
    existing = {e.name: e for e in before.entities}
    existing_relations = {r.key for r in before.relations}
    new_entities = [e for e in entities.values() if e.name not in existing]
    additions = [
        {"entityName": e.name, "contents": list(e.observations)}
        for e in entities.values()
        if e.name in existing
    ]
    wanted = list(relations.values())
    total = len(new_entities) + len(additions) + len(wanted)
    for name in entities:
        if name in existing and existing[name].entity_type != entities[name].entity_type:
            report.skipped.append(
                f"entity {name!r}: already in the store as type "
                f"{existing[name].entity_type!r}; kept that type"
            )
    lists: list[list[Any]] = [new_entities, additions, wanted]
    calls: list[Callable[[list[Any]], list[Any]]] = [
        graph.create_entities,
        graph.add_observations,
        graph.create_relations,
    ]
    work = [
        (n, items[i : i + batch_size])
        for n, items in enumerate(lists)
        for i in range(0, len(items), batch_size)
    ]
    # One commit, unless the input is large: the store checks each new path against every
    # change staged in the transaction, so one huge transaction costs quadratic time.
    groups = [work] if total <= batch_size else [[step] for step in work]
    done = 0
    results: list[list[Any]] = [[], [], []]
    for number, group in enumerate(groups, 1):
        part = f" ({number}/{len(groups)})" if len(groups) > 1 else ""
        with graph.batch(f"import mcp-jsonl: {path.name}{part}"):
            for n, items in group:
                results[n] += calls[n](items)
                done += len(items)
                if progress:
                    progress(done, total)
    if len(groups) > 1:
        report.notes.append(
            f"{total} entries imported in {len(groups)} commits of at most {batch_size}"
        )
    created, added, made = results
    report.written = {
        "entities": len(created),
        "observations added to existing entities": sum(len(a["addedObservations"]) for a in added),
        "relations": len(made),
    }
    report.unchanged = {
        "entities": len(additions),
        "relations": sum(1 for k in relations if k in existing_relations),
    }
    tip = store.db().tip()
    report.commit = str(tip.id) if tip is not None else None
    after = graph.read_graph()
    stored = {e.name: e for e in after.entities}
    stored_relations = {r.key for r in after.relations}
    report.checked = len(entities) + len(relations)
    for entity in entities.values():
        got = stored.get(entity.name)
        if got is None:
            report.mismatches.append(f"entity {entity.name!r} is not in the store")
        elif entity.name not in existing and got != entity:
            report.mismatches.append(f"entity {entity.name!r} differs: {got.to_dict()}")
        elif entity.name in existing and not set(entity.observations) <= set(got.observations):
            report.mismatches.append(f"entity {entity.name!r} lacks some observations")
    report.mismatches += [
        f"relation {k} is not in the store" for k in relations if k not in stored_relations
    ]
    return report


def export_mcp_jsonl(store: Store, dest: str | Path) -> tuple[str, Fidelity]:
    """Write the knowledge graph as a reference-server ``memory.jsonl`` at ``dest`` (``-``:
    return the text only). Returns the text and the check of every line against the graph."""
    graph = Graph(store).read_graph()
    # As the reference server saves it (JSON.stringify's output: no spaces, non-ASCII as is,
    # its key order): entities, then relations, one per line.
    rows = [{"type": "entity", **e.to_dict()} for e in graph.entities]
    rows += [{"type": "relation", **r.to_dict()} for r in graph.relations]
    text = "\n".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) for r in rows)
    report = Fidelity("export mcp-jsonl", str(dest))
    report.read = {"entities": len(graph.entities), "relations": len(graph.relations)}
    if str(dest) != "-":
        target = Path(dest)
        if target.is_dir():
            raise InvalidInputError(f"{target} is a directory; give a file name (memory.jsonl)")
        target.write_text(text, encoding="utf-8")
        text_back = _read_text(target)
    else:
        text_back = text
    entries, bad = parse_mcp_jsonl(text_back)
    report.mismatches.extend(bad)
    items = [item for _, item in entries]
    report.written = {
        "entities": sum(isinstance(i, Entity) for i in items),
        "relations": sum(isinstance(i, Relation) for i in items),
    }
    expected: list[Entity | Relation] = [*graph.entities, *graph.relations]
    report.checked = len(expected)
    if items != expected:
        missing = [i for i in expected if i not in items]
        report.mismatches.extend(f"not written exactly: {i.to_dict()}" for i in missing)
        if not missing:
            report.mismatches.append("the written lines are not in the graph's order")
    return text, report


@dataclass(frozen=True)
class _SourceFile:
    source: Path
    scope: Scope | None
    id: str
    path: str
    data: bytes


# The most an imported file may hold: the largest body a store takes by default, its
# front-matter bound and some slack; a bigger file is refused before it is read whole.
MAX_IMPORT_FILE_BYTES = 16 * 1024 * 1024


def _walk(root: Path, report: Fidelity) -> Iterator[Path]:
    """The regular ``*.md`` files under ``root``. Symbolic links (a prepared folder may
    link to ``~/.ssh``), FIFOs, sockets and devices are skipped and listed in the report."""
    for folder, dirs, files in os.walk(root):
        here = Path(folder)
        keep = []
        for name in sorted(dirs):
            if name.startswith("."):
                continue
            if (here / name).is_symlink():
                report.skipped.append(_link_note(root, here / name))
            else:
                keep.append(name)
        dirs[:] = keep
        for name in sorted(files):
            if not name.endswith(MEMORY_SUFFIX) or name.startswith("."):
                continue
            path = here / name
            try:
                mode = path.lstat().st_mode
            except OSError:
                continue  # gone since the listing
            if stat.S_ISLNK(mode):
                report.skipped.append(_link_note(root, path))
            elif not stat.S_ISREG(mode):
                report.skipped.append(
                    f"{path.relative_to(root)}: not a regular file (a FIFO, socket or device)"
                )
            else:
                yield path


def _link_note(root: Path, link: Path) -> str:
    try:
        inside = link.resolve(strict=False).is_relative_to(root.resolve())
    except (OSError, RuntimeError):  # a loop
        inside = False
    where = "" if inside else " out of the folder"
    after = " (its target is imported at its own path)" if inside else ""
    return f"{link.relative_to(root)}: a symbolic link{where}; links are not followed{after}"


def _read_source(path: Path) -> bytes:
    """A walked file's bytes, opened without following a link that replaced it since."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise InvalidInputError(f"{path.name} became a symbolic link; not followed") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise InvalidInputError(f"{path.name} is not a regular file")
        if info.st_size > MAX_IMPORT_FILE_BYTES:
            raise InvalidInputError(
                f"{path.name} is {info.st_size} bytes, over the import bound of "
                f"{MAX_IMPORT_FILE_BYTES}"
            )
        data = handle.read(MAX_IMPORT_FILE_BYTES + 1)
    if len(data) > MAX_IMPORT_FILE_BYTES:
        raise InvalidInputError(f"{path.name} grew past the import bound while it was read")
    return data


def _import_folder(
    store: Store,
    directory: str | Path,
    operation: str,
    read: Callable[[Path, Path, Fidelity], _SourceFile | None],
    skip_bad: bool,
) -> tuple[Fidelity, list[_SourceFile]]:
    """``read(source, relative, report)`` of every walked file (None: skipped), and the
    files whose place is free or holds the same bytes; a file that cannot be imported
    stops the import unless ``skip_bad``."""
    root = Path(directory)
    if not root.is_dir():
        raise InvalidInputError(f"{root} is not a directory")
    report = Fidelity(operation, str(root))
    bad: list[str] = []
    files: list[_SourceFile] = []
    for source in _walk(root, report):
        relative = source.relative_to(root)
        try:
            found = read(source, relative, report)
        except (GitmemError, OSError) as exc:
            bad.append(f"{relative}: {exc}")
            continue
        files += [found] if found is not None else []
    report.read = {"files": len(files) + len(bad)}
    snapshots = {scope: store.db(scope).snapshot() for scope in store.scopes}
    kept = []
    for f in files:
        scope = f.scope or store.default_scope
        if snapshots[scope].read(f.path) in (None, f.data):
            kept.append(f)
        else:
            where = f.source.relative_to(root)
            bad.append(f"{where}: {f.id} is already in the {scope} store with other content")
    if bad and not skip_bad:
        more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
        raise InvalidInputError(
            f"{bad[0]}{more}; nothing was imported",
            hint="fix or remove those files, or pass --skip-bad to import the rest",
        )
    report.skipped.extend(bad)
    return report, kept


def import_files(
    store: Store,
    directory: str | Path,
    *,
    skip_bad: bool = False,
    progress: Progress | None = None,
) -> Fidelity:
    """Import the ``*.md`` files below ``directory`` byte for byte (but for the derived
    fields an export writes), one commit per scope (the top folder, else the ``scope`` field,
    else the default); other bytes already at a file's place stop the import."""
    seen: dict[tuple[Scope | None, str], Path] = {}

    def read(source: Path, relative: Path, report: Fidelity) -> _SourceFile:
        data = memfile.without_derived(_read_source(source))
        memory = store.check_file(data, what=str(relative))
        folder = relative.parts[0] if len(relative.parts) > 1 else None
        named = [s for s in (folder, memory.to_metadata().get("scope")) if s in {"repo", "user"}]
        scope = Scope(named[0]) if named else None
        if scope is not None and scope not in store.scopes:
            report.notes.append(
                f"{relative}: no {scope} store is open, so it went to the "
                f"{store.default_scope} store"
            )
            scope = None
        if (scope, memory.id) in seen:
            raise InvalidInputError(f"id {memory.id} is also in {seen[scope, memory.id]}")
        seen[scope, memory.id] = relative
        return _SourceFile(source, scope, memory.id, memory_path(memory.id), data)

    report, files = _import_folder(store, directory, "import files", read, skip_bad)
    _write_files(store, files, report, f"import: {{}} from {Path(directory).name}", progress)
    return report


def _write_files(
    store: Store,
    files: list[_SourceFile],
    report: Fidelity,
    subject: str,
    progress: Progress | None,
    dates: Mapping[str, dt.date] | None = None,
) -> None:
    """Put each file's bytes at its place, one commit per scope (and per date, for files in
    ``dates``), and check every one; a place filled meanwhile fails the whole import."""
    by_scope: dict[tuple[Scope, dt.date | None], list[_SourceFile]] = {}
    for f in files:
        when = (dates or {}).get(f.id)
        by_scope.setdefault((f.scope or store.default_scope, when), []).append(f)
    total = len(files)
    done = 0
    written = unchanged = 0
    for (scope, when), group in sorted(
        by_scope.items(), key=lambda item: (item[0][1] is None, item[0][1] or dt.date.min)
    ):
        start = done

        def plan(
            snap: Snapshot, group: list[_SourceFile] = group, start: int = start
        ) -> tuple[CommitSpec, int]:
            nonlocal done
            done = start
            ids: list[str] = []
            for f in group:
                if snap.read(f.path) == f.data:
                    continue
                if snap.exists(f.path):
                    raise AlreadyExistsError(f"{f.id} was written by someone else meanwhile")
                snap.put(f.path, f.data)
                ids.append(f.id)
                done += 1
                if progress:
                    progress(done, total)
            count = f"{len(ids)} memor{'y' if len(ids) == 1 else 'ies'}"
            trailers = [(OP_TRAILER, "create"), *((ID_TRAILER, i) for i in ids)]
            return CommitSpec(subject=subject.format(count), trailers=trailers), len(ids)

        db = store.db(scope)
        if when is not None:  # the same repository, with a clock that says that date
            moment = dt.datetime.combine(when, dt.time(0), tzinfo=dt.UTC)
            db = GitDB(db.gitdir, branch=db.branch, clock=FixedClock(moment))
        count, oid = db.write(plan)
        written += count
        unchanged += len(group) - count
        report.commit = str(oid) if oid is not None else report.commit
    report.written = {"files": written}
    report.unchanged = {"files": unchanged}
    for f in files:
        report.checked += 1
        snap = store.db(f.scope or store.default_scope).snapshot()
        got = snap.read(f.path)
        if got != f.data:
            report.mismatches.append(f"{f.id}: the stored file differs from {f.source}")
        elif store.get(f.id, scope=f.scope or store.default_scope) is None:
            report.mismatches.append(f"{f.id}: stored but not readable as a memory")
    if progress:
        progress(total, total)


def export_files(store: Store, dest: str | Path) -> Fidelity:
    """Copy every memory file of every open scope to ``dest/<scope>/<its path>``, with the
    derived ``version`` and ``updated_at`` written in, and check each copy."""
    target = _empty_folder(dest)
    report = Fidelity("export files", str(target))
    for scope in store.scopes:
        snap = store.db(scope).snapshot()
        files = memory_versions.memory_files(snap)
        for path, data in memory_versions.rendered_files(snap.repo, snap.commit, files).items():
            relative = path if is_path_id(id_from_path(path) or "") else path.split("/")[-1]
            out = target / str(scope) / relative
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            report.checked += 1
            if out.read_bytes() != data:
                report.mismatches.append(f"{out}: differs from {path}")
    report.read = report.written = {"files": report.checked}
    return report


FORGE_ROOTS = tuple(LAYER_ROOTS.values())


def _forge_title(body: str, memory_id: str) -> str:
    for line in body.split("\n"):
        if line.startswith("# ") and line[2:].strip():
            return " ".join(line[2:].split())[:200]
    return memory_id.rsplit("/", 1)[-1].replace("_", " ")


def _forge_file(store: Store, memory_id: str, text: str) -> tuple[bytes, str, dt.date | None]:
    """A Forge document as a memory file, its body and the date of its ``Last Updated``
    line (None when it has none: then it is dated now)."""
    date = codec.legacy_last_updated(text)
    if date is not None:
        body = text.split("\n", 1)[1] if "\n" in text else ""
        when = dt.datetime.combine(date, dt.time(0), tzinfo=dt.UTC)
    else:
        body = text.removeprefix(codec.BOM)
        when = store.clock.now()
    memory = Memory(
        id=memory_id,
        body=body,
        created_at=when,
        updated_at=when,
        version=1,
        title=_forge_title(body, memory_id),
        scope=store.default_scope,
        trigger=Trigger.IMPORT,
        extra=layer_fields(memory_id),
    )
    data = codec.serialize(codec.Document(memory.to_metadata(), body)).encode("utf-8")
    return data, body, date


def import_forge(
    store: Store,
    directory: str | Path,
    *,
    skip_bad: bool = False,
    progress: Progress | None = None,
) -> Fidelity:
    """Import a Forge plugin memory folder: ``<layer path>/<file>.md`` becomes the document
    of that path id, dated by its ``<!-- Last Updated -->`` line, the rest its body."""
    bodies: dict[str, tuple[str, dt.date | None]] = {}

    def read(source: Path, relative: Path, report: Fidelity) -> _SourceFile | None:
        if relative.parts[0] not in FORGE_ROOTS:
            report.skipped.append(f"{relative}: not under {', '.join(FORGE_ROOTS)}")
            return None
        memory_id = check_id(relative.as_posix()[: -len(MEMORY_SUFFIX)])
        text = codec.decode(_read_source(source), what=str(relative))
        if codec.parse(text).has_front_matter:
            data = text.encode("utf-8")
        else:
            data, body, date = _forge_file(store, memory_id, text)
            bodies[memory_id] = (body, date)
            if date is None:
                report.notes.append(
                    f"{relative}: no <!-- Last Updated --> line, so it is dated now"
                )
        checked = store.check_file(data, what=str(relative))
        if checked.id != memory_id:
            raise InvalidMemoryError(f"{relative} carries id {checked.id!r}")
        return _SourceFile(source, None, memory_id, memory_path(memory_id), data)

    report, files = _import_folder(store, directory, "import forge", read, skip_bad)
    dated = {memory_id: date for memory_id, (_, date) in bodies.items() if date is not None}
    subject = f"import: {{}} from Forge folder {Path(directory).name}"
    _write_files(store, files, report, subject, progress, dated)
    for f in files:
        if f.id not in bodies:
            continue
        body, date = bodies[f.id]
        got = store.get(f.id)
        if got is None or got.body != body:
            report.mismatches.append(f"{f.id}: the stored body differs from {f.source}")
        elif date is not None and got.updated_at.date() != date:
            report.mismatches.append(f"{f.id}: dated {got.updated_at.date()}, not {date}")
    return report


def export_forge(store: Store, dest: str | Path) -> Fidelity:
    """Write every layered document to ``dest/<its path>.md`` in the Forge plugin's format
    (``<!-- Last Updated: YYYY-MM-DD -->`` then the body), and check each file."""
    target = _empty_folder(dest)
    report = Fidelity("export forge", str(target))
    for folder in FORGE_ROOTS:
        for memory_id in store.documents(folder, recursive=True):
            memory = store.read(memory_id)
            out = target / f"{memory_id}{MEMORY_SUFFIX}"
            out.parent.mkdir(parents=True, exist_ok=True)
            date = memory.updated_at.date().isoformat()
            out.write_bytes(f"<!-- Last Updated: {date} -->\n{memory.body}".encode())
            report.checked += 1
            text = codec.decode(out.read_bytes(), what=str(out))
            if codec.legacy_last_updated(text) != memory.updated_at.date() or (
                text.split("\n", 1)[1] != memory.body
            ):
                report.mismatches.append(f"{out}: does not read back as {memory_id}")
    report.read, report.written = {"documents": report.checked}, {"files": report.checked}
    return report
