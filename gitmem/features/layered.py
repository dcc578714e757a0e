"""The layered MemoryStore of the Forge documents (``projects/{project}/{file_type}``,
``skills/...``, ``commands/...``, ``agents/...``; docs/layered.md) over the git store: each
document is a memory whose id is its path. ``to_dict()`` gives the camelCase shapes agents
expect; the lifecycle rules say what to prune and check, this module writes it in one commit.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from gitmem.base.errors import AlreadyExistsError, InvalidInputError, NotFoundError
from gitmem.base.trailers import PRUNE_TRAILER
from gitmem.features.layers import (
    LAYER_ROOTS,
    Layer,
    document_id,
    layer_fields,
    parse_layer,
    placement,
)
from gitmem.features.lifecycle import quality as _quality
from gitmem.features.lifecycle import rules as _rules
from gitmem.features.lifecycle.sections import count_lines
from gitmem.features.lifecycle.staleness import (
    Staleness,
    StalenessPolicy,
    StalenessReport,
    classify,
    days_since,
    staleness_report,
)
from gitmem.format import schema
from gitmem.format.layout import check_id
from gitmem.format.model import Memory
from gitmem.store.core import Store

ENTRY_SCHEMA = "memory_entry.schema.json"
STRUCTURAL_FILE_TYPES: frozenset[str] = frozenset({"index"})
"""File types that describe a folder rather than hold memory: left out of listings and reports."""

POTENTIALLY_STALE = "[POTENTIALLY STALE]"


_NAMED = ("project", "skill", "command", "agent")


def _json(value: Any) -> Any:
    if isinstance(value, _Shaped):
        return value.to_dict()
    if isinstance(value, list | tuple):
        return [_json(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _json(v) for k, v in value.items()}
    return schema.to_json_value(value)  # a layer or staleness is a string already


class _Shaped:
    """A result whose ``to_dict()`` is its fields in order, camelCase, as JSON values
    (those named in ``_omitted`` left out when None)."""

    _omitted: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            re.sub(r"_(\w)", lambda m: m.group(1).upper(), f.name): _json(getattr(self, f.name))
            for f in fields(self)  # type: ignore[arg-type]
            if f.name not in self._omitted or getattr(self, f.name) is not None
        }


@dataclass(frozen=True)
class CreateResult(_Shaped):
    id: str
    path: str
    created: dt.datetime


@dataclass(frozen=True, kw_only=True)
class Document(_Shaped):
    """A layered document as read: content plus what an agent needs to judge it;
    ``advisory`` is ``[POTENTIALLY STALE] ...`` when it is stale."""

    _omitted = ("project", "skill", "command", "agent")
    id: str
    path: str
    layer: Layer
    file_type: str
    project: str | None = None
    skill: str | None = None
    command: str | None = None
    agent: str | None = None
    content: str
    created_at: dt.datetime
    updated_at: dt.datetime | None
    version: int
    staleness: Staleness
    days_since_update: int | None
    line_count: int
    advisory: str | None = None


@dataclass(frozen=True)
class UpdateResult(_Shaped):
    id: str
    updated: bool
    line_count: int
    warning: str | None = None


@dataclass(frozen=True)
class PrunedItem(_Shaped):
    id: str
    action: str
    reason: str
    section: str | None = None


@dataclass(frozen=True)
class AppendResult(_Shaped):
    id: str
    appended: bool
    line_count: int
    pruned: bool
    prune_details: tuple[PrunedItem, ...] = ()
    warning: str | None = None


@dataclass(frozen=True)
class DeleteResult(_Shaped):
    id: str
    deleted: bool


@dataclass(frozen=True)
class ProjectMemory(_Shaped):
    """``get_by_project``: a project's documents grouped by layer."""

    project: str
    shared: tuple[Document, ...] = ()
    skills: Mapping[str, tuple[Document, ...]] = field(default_factory=dict)
    commands: tuple[Document, ...] = ()


@dataclass(frozen=True)
class ProjectProfile(_Shaped):
    """``get_project_profile``: the project's overview and what else is known about it."""

    project: str
    overview: Document | None
    file_types: tuple[str, ...]
    skills: tuple[str, ...]
    last_updated: dt.datetime | None
    staleness: Staleness | None


@dataclass(frozen=True)
class PrunePolicy:
    """What ``prune`` looks at: ``scope`` all, project (one project's documents in every
    layer) or skill (one skill's documents, optionally of one project)."""

    scope: str = "all"
    project: str | None = None
    skill: str | None = None
    dry_run: bool = False

    def __post_init__(self) -> None:
        if self.scope not in {"all", "project", "skill"}:
            raise InvalidInputError(f"prune scope {self.scope!r} is not one of all, project, skill")
        if self.scope == "project" and not self.project:
            raise InvalidInputError("prune scope 'project' needs a project")
        if self.scope == "skill" and not self.skill:
            raise InvalidInputError("prune scope 'skill' needs a skill")
        for what in ("project", "skill"):
            value = getattr(self, what)
            if value is not None:
                check_id(value, what=what)


@dataclass(frozen=True)
class PruneReport(_Shaped):
    pruned: tuple[PrunedItem, ...]
    warnings: tuple[str, ...]
    dry_run: bool
    commit: str | None = None


class LayeredStore:
    """The Forge MemoryStore interface over a gitmem :class:`~gitmem.store.core.Store`;
    ``agent`` and ``session_id`` are recorded on every write."""

    def __init__(
        self, store: Store, *, agent: str | None = None, session_id: str | None = None
    ) -> None:
        self.store = store
        self.agent = agent
        self.session_id = session_id

    @property
    def _config(self) -> Mapping[str, Any]:
        return self.store.config().raw

    def _now(self) -> dt.datetime:
        return self.store.clock.now()

    def _policy(self) -> StalenessPolicy:
        return StalenessPolicy.from_config(self._config)

    def _document(
        self,
        memory: Memory,
        now: dt.datetime | None = None,
        policy: StalenessPolicy | None = None,
    ) -> Document:
        where = placement(memory.id)
        if where is None:
            raise InvalidInputError(f"{memory.id} is not a layered document id")
        now = now or self._now()
        state = classify(memory.updated_at, now, policy or self._policy())
        days = days_since(memory.updated_at, now)
        advisory = None
        if state is Staleness.STALE:
            advisory = (
                f"{POTENTIALLY_STALE} last updated {days} days ago "
                f"({memory.updated_at.date().isoformat()}); verify it before relying on it"
            )
        return Document(
            id=memory.id,
            path=memory.path or f"{memory.id}.md",
            layer=Layer(where["layer"]),
            file_type=where["file_type"],
            content=memory.body,
            created_at=memory.created_at,
            updated_at=memory.updated_at,
            version=memory.version,
            staleness=state,
            days_since_update=days,
            line_count=count_lines(memory.body),
            project=where.get("project"),
            skill=where.get("skill"),
            command=command if isinstance(command := memory.extra.get("command"), str) else None,
            agent=where.get("agent"),
            advisory=advisory,
        )

    def _content_ids(self, folder: str, *, recursive: bool = False) -> list[str]:
        """Ids of the layered documents in ``folder``, structural files (index.md) left out."""
        places = ((i, placement(i)) for i in self.store.documents(folder, recursive=recursive))
        return [
            i for i, w in places if w is not None and w["file_type"] not in STRUCTURAL_FILE_TYPES
        ]

    def _all_content_ids(self) -> list[str]:
        """``_content_ids`` of every layer, layer by layer."""
        return [i for root in LAYER_ROOTS.values() for i in self._content_ids(root, recursive=True)]

    def _documents(self, folder: str, *, recursive: bool = False) -> list[Document]:
        now, policy = self._now(), self._policy()  # once per listing, not per document
        memories = (self.store.get(i) for i in self._content_ids(folder, recursive=recursive))
        return [self._document(m, now, policy) for m in memories if m is not None]

    def _file_type(self, id: str) -> str:
        """The file type of a layered document id; any other id is refused."""
        check_id(id)
        where = placement(id)
        if where is None:
            raise InvalidInputError(
                f"{id!r} is not a layered document id "
                "(projects/<project>/<type>, skills/<skill>/<project>/<type>, "
                "commands/<project>/<type> or agents/<agent>/<type>)"
            )
        return where["file_type"]

    def _require_doc(self, id: str) -> tuple[Memory, str]:
        file_type = self._file_type(id)
        memory = self.store.get(id)
        if memory is None:
            raise NotFoundError(f"no layered document {id}", hint="create it first")
        return memory, file_type

    def _write_count(self, id: str) -> int:
        """How many commits have written this document so far (from git history)."""
        return sum(1 for v in self.store.history(id) if v.memory_id == id and v.op != "delete")

    def _who(self) -> dict[str, Any]:
        """The agent and session fields to record on a write (none given: leave them)."""
        who = {"agent": self.agent, "session_id": self.session_id}
        return {k: v for k, v in who.items() if v is not None}

    def _size_warning(self, file_type: str, line_count: int) -> str | None:
        limits = _rules.size_limits_from_config(self._config)
        return _rules.size_warning(file_type, line_count, limits)

    def create(self, entry: Mapping[str, Any]) -> CreateResult:
        """Create a document from its JSON shape (camelCase, checked against
        ``schemas/memory_entry.schema.json``); ``AlreadyExistsError`` if it exists."""
        if not isinstance(entry, Mapping):
            raise InvalidInputError(f"a memory entry must be an object, not {type(entry).__name__}")
        schema.validate(dict(entry), schema=ENTRY_SCHEMA, what="memory entry")
        names = {name: entry.get(name) for name in _NAMED}
        memory_id = document_id(entry["layer"], entry["fileType"], **names)
        extra: dict[str, Any] = layer_fields(memory_id)
        if entry.get("command"):
            extra["command"] = entry["command"]
        if self.store.get(memory_id) is not None:
            raise AlreadyExistsError(
                f"{memory_id} already exists", hint="use update or append to change it"
            )
        memory = self.store.create(
            entry["content"],
            id=memory_id,
            title=entry.get("title") or _default_title(memory_id),
            tags=tuple(entry.get("tags") or ()),
            extra=extra,
            allow_empty=True,  # the caller's to check (the CLI's --allow-empty)
            **self._who(),
        )
        return CreateResult(memory.id, memory.path or f"{memory.id}.md", memory.created_at)

    def read(
        self,
        layer: Layer | str,
        project: str | None,
        file_type: str,
        skill: str | None = None,
        command: str | None = None,
        agent: str | None = None,
    ) -> Document | None:
        """The document, or None when there is none."""
        return self.get(
            document_id(
                layer, file_type, project=project, skill=skill, command=command, agent=agent
            )
        )

    def get(self, id: str) -> Document | None:
        """A document by id, or None."""
        check_id(id)
        memory = self.store.get(id)
        return None if memory is None or placement(id) is None else self._document(memory)

    def update(self, id: str, content: str) -> UpdateResult:
        """Replace the content: timestamp refreshed (staleness reset), size limits checked."""
        _, file_type = self._require_doc(id)
        memory = self.store.update(id, content, allow_empty=True, **self._who())
        lines = count_lines(memory.body)
        return UpdateResult(id, True, lines, self._size_warning(file_type, lines))

    def append(self, id: str, content: str) -> AppendResult:
        """Add content at the end, then prune by the file type's rule, in one commit."""
        current, file_type = self._require_doc(id)
        count = self._write_count(id) + 1
        gap = "\n" if current.body and not current.body.endswith("\n") else ""
        body = current.body + gap + content
        with self.store.transaction(f"append: {id}") as tx:
            self.store.update(id, body, allow_empty=True, **self._who())
            items = self._prune_one(id, file_type, body, count)
            tx.trailers.extend(_trailers(items))
        lines = count_lines(self.store.read(id).body)
        return AppendResult(
            id=id,
            appended=True,
            line_count=lines,
            pruned=bool(items),
            prune_details=tuple(items),
            warning=self._size_warning(file_type, lines),
        )

    def delete(self, id: str) -> DeleteResult:
        """Delete one document (parent folders untouched; ``gitmem restore`` brings it back)."""
        self._file_type(id)
        return DeleteResult(id, self.store.delete(id, agent=self.agent, session_id=self.session_id))

    def get_shared_project_memory(self, project: str) -> list[Document]:
        check_id(project, what="project")
        return self._documents(f"projects/{project}")

    def get_skill_memory(self, skill: str, project: str | None = None) -> list[Document]:
        check_id(skill, what="skill")
        if project is None:
            return self._documents(f"skills/{skill}", recursive=True)
        check_id(project, what="project")
        return self._documents(f"skills/{skill}/{project}")

    def get_command_memory(self, project: str, command: str | None = None) -> list[Document]:
        check_id(project, what="project")
        docs = self._documents(f"commands/{project}")
        if command is not None:
            check_id(command, what="command")
            docs = [d for d in docs if d.command == command]
        return docs

    def get_agent_memory(self, agent: str) -> list[Document]:
        check_id(agent, what="agent")
        return self._documents(f"agents/{agent}")

    def _skill_docs_for(self, project: str) -> dict[str, tuple[Document, ...]]:
        skills: dict[str, list[Document]] = {}
        for doc in self._documents("skills", recursive=True):
            if doc.project == project and doc.skill is not None:
                skills.setdefault(doc.skill, []).append(doc)
        return {name: tuple(docs) for name, docs in sorted(skills.items())}

    def get_by_project(self, project: str) -> ProjectMemory:
        check_id(project, what="project")
        return ProjectMemory(
            project=project,
            shared=tuple(self.get_shared_project_memory(project)),
            skills=self._skill_docs_for(project),
            commands=tuple(self.get_command_memory(project)),
        )

    def get_project_profile(self, project: str) -> ProjectProfile:
        shared = self.get_shared_project_memory(project)
        overview = next((d for d in shared if d.file_type == "project_overview"), None)
        last = max((d.updated_at for d in shared if d.updated_at is not None), default=None)
        return ProjectProfile(
            project=project,
            overview=overview,
            file_types=tuple(d.file_type for d in shared),
            skills=tuple(self._skill_docs_for(project)),
            last_updated=last,
            staleness=None if last is None else classify(last, self._now(), self._policy()),
        )

    def _prune_one(
        self,
        id: str,
        file_type: str,
        body: str,
        write_count: int,
        registry: _rules.RuleRegistry | None = None,
    ) -> list[PrunedItem]:
        """Run the file type's rule over ``body`` and stage what it says; the actions.
        ``registry``: the config's rules, built once by a caller pruning many documents."""
        if registry is None:
            registry = _rules.registry_from_config(self._config, gitdir=str(self.store.db().gitdir))
        rule = registry.get(file_type)
        if rule is None:
            return []
        name = rule.archive  # the archive's file type, in the same folder
        archive_id = f"{id.rsplit('/', 1)[0]}/{name}"
        archive = self.store.get(archive_id) if name else None
        result = _rules.apply_rule(
            file_type,
            body,
            today=self._now().date(),
            write_count=write_count,
            archive_text=archive.body if archive is not None else None,
            config=self._config,
            registry=registry,
        )
        who = self._who()
        if result.body != body:
            self.store.update(id, result.body, allow_empty=True, **who)
        text = result.archive_text
        if name and text is not None and archive is not None and text != archive.body:
            self.store.update(archive_id, text, allow_empty=True, **who)
        elif name and text is not None and archive is None:
            kept = {"layer", "project", "skill", "command"}
            extra = {k: v for k, v in self.store.read(id).extra.items() if k in kept}
            title = f"{name.replace('_', ' ')} ({archive_id.split('/')[1]})"
            extra["file_type"] = name
            self.store.create(
                text, id=archive_id, title=title, extra=extra, allow_empty=True, **who
            )
        return [PrunedItem(id, a.action, a.reason, a.section) for a in result.actions]

    def _in_scope(self, policy: PrunePolicy) -> list[str]:
        wanted = {"project": policy.project, "skill": policy.skill}
        places = {i: placement(i) or {} for i in self._all_content_ids()}
        return sorted(
            i for i, w in places.items() if all(v in {None, w.get(k)} for k, v in wanted.items())
        )

    def prune(self, policy: PrunePolicy | None = None) -> PruneReport:
        """Run every document's rule and the size limits over the documents in scope, as
        one commit whose ``Gitmem-Prune`` trailers list each action; ``dry_run`` writes
        nothing. Removed text stays in history and in the archive documents."""
        policy = policy or PrunePolicy()
        ids = self._in_scope(policy)
        # Write counts come from history, read before the transaction: inside one the
        # index cannot see staged writes and history would fall back to a full scan.
        counts = {memory_id: self._write_count(memory_id) for memory_id in ids}
        # Once per run, not per document; the user's own per-store rules apply (localconfig).
        registry = _rules.registry_from_config(self._config, gitdir=str(self.store.db().gitdir))
        limits = _rules.size_limits_from_config(self._config)
        items: list[PrunedItem] = []
        warnings: list[str] = []
        try:
            with self.store.transaction("prune: lifecycle rules") as tx:
                for memory_id in ids:
                    body = self.store.read(memory_id).body
                    file_type = (placement(memory_id) or {})["file_type"]
                    items.extend(
                        self._prune_one(memory_id, file_type, body, counts[memory_id], registry)
                    )
                    lines = count_lines(self.store.read(memory_id).body)
                    warning = _rules.size_warning(file_type, lines, limits)
                    if warning:
                        warnings.append(f"{memory_id}: {warning}")
                tx.trailers.extend(_trailers(items))
                if policy.dry_run:
                    raise _DryRun
        except _DryRun:
            return PruneReport(tuple(items), tuple(warnings), True, None)
        return PruneReport(tuple(items), tuple(warnings), False, tx.commit)

    def validate(self, id: str) -> dict[str, Any]:
        """Quality checks of one document (``id``, ``writeCount`` and the report of
        :func:`~gitmem.features.lifecycle.quality.validate_document`); growth reads its line
        counts across its writes in git history."""
        current, file_type = self._require_doc(id)
        line_counts = [
            count_lines(v.memory.body)
            for v in self.store.history(id)
            if v.memory_id == id and v.memory is not None
        ]
        report = _quality.validate_document(
            file_type,
            current.body,
            line_counts=line_counts,
            write_count=len(line_counts),
            policy=_quality.QualityPolicy.from_config(self._config),
        )
        return {"id": id, "writeCount": len(line_counts), **report}

    def validate_all(self) -> list[dict[str, Any]]:
        """``validate`` for every layered document (structural files left out)."""
        return [self.validate(memory_id) for memory_id in self._all_content_ids()]

    def get_staleness_report(self) -> StalenessReport:
        """Fresh / aging / stale across every layer (structural files left out)."""
        memories = (self.store.get(i) for i in self._all_content_ids())
        records = [(m.id, m.path, m.updated_at) for m in memories if m is not None]
        return staleness_report(records, self._now(), self._policy())

    def search(
        self,
        pattern: str,
        *,
        layer: Layer | str | None = None,
        project: str | None = None,
        limit: int = 20,
    ) -> Any:
        """Documents that answer ``pattern`` (:meth:`Store.recall`), by layer and project."""
        from gitmem.store.search import SearchResults, from_recall

        layer_value = None if layer is None else str(parse_layer(layer))
        recalled = self.store.recall(pattern, layer=layer_value, project=project, limit=limit)
        return SearchResults(
            query=pattern,
            mode="natural",
            matches=[from_recall(h.memory, h.score, h.lines) for h in recalled],
            notice=recalled.notice,
        )


class _DryRun(Exception):
    """Raised inside a prune transaction to drop everything it staged."""


def _trailers(items: Sequence[PrunedItem]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for item in items:
        where = f" [{item.section}]" if item.section else ""
        reason = " ".join(f"{item.action}{where}: {item.reason}".split())
        out.append((PRUNE_TRAILER, f"{item.id} {reason}"))
    return out


def _default_title(memory_id: str) -> str:
    where = placement(memory_id) or {}
    owner = where.get("project") or where.get("agent") or ""
    if where.get("skill"):
        owner = f"{where['skill']}, {owner}"
    label = str(where.get("file_type", memory_id)).replace("_", " ")
    return f"{label} ({owner})" if owner else label
