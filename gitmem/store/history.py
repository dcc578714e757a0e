"""A memory's history: the chain of memories it supersedes, the versions of each, the
newest memory a chain leads to, and a deleted memory's last content."""

from __future__ import annotations

import builtins
import contextlib
import heapq
from collections.abc import Sequence
from dataclasses import replace

import pygit2

from gitmem.base import logs
from gitmem.base.errors import GitmemError, InvalidIdError, NotFoundError
from gitmem.format.layout import check_id, memory_path
from gitmem.format.model import Memory
from gitmem.format.versions import RENAMED_FROM, earlier, walk_back, walk_forward
from gitmem.git.objects import blob_data
from gitmem.store import memory_versions
from gitmem.store.inputs import whole_number
from gitmem.store.reads import Reads
from gitmem.store.results import History, Version
from gitmem.store.transactions import Backend

log = logs.get(__name__)


class VersionHistory(Reads):
    """The history reads of a Store: version chains and each memory's versions."""

    def _last_data(self, backend: Backend, memory_id: str) -> bytes | None:
        """The newest content ``memory_id`` had in history (for a deleted one)."""
        kept = [v.source for v in self._reader(backend).versions([memory_id]) if v.source]
        return blob_data(backend.db.repo, pygit2.Oid(hex=kept[-1][0])) if kept else None

    def _predecessor(self, other: str, warnings: builtins.list[str]) -> Memory | None:
        """A memory named in ``supersedes``, now or as it last was before a delete; None when there
        is none or it cannot be read (reported in ``warnings``: links are written by hand too)."""
        try:
            found = self.get(other)
        except InvalidIdError:
            warnings.append(f"supersedes names {other!r}, which is not a valid id")
            return None
        except GitmemError as exc:
            warnings.append(f"{other} cannot be read: {exc}")
            return None
        return found if found is not None else self._last_known(other)

    def _last_known(self, id: str) -> Memory | None:
        """A deleted memory as it last was, from history (chains may run through deleted ones)."""
        for backend in self._ordered(None):
            data = self._last_data(backend, id)
            if data is not None:
                with contextlib.suppress(GitmemError):
                    return self._decode(backend, data, memory_path(id))
        return None

    def latest_version(self, id: str) -> Memory:
        """The newest memory that (transitively) supersedes ``id``, or ``id`` itself; on a fork the
        higher version, then the later ``updated_at``, then the id (with a warning)."""
        latest_id, warnings = walk_forward(id, self.successors)
        for warning in warnings:
            log.warning("%s", warning)
        return self.read(latest_id)

    def successors(self, id: str) -> builtins.list[Memory]:
        """Memories that name ``id`` in ``supersedes`` (more than one is a fork)."""
        check_id(id)
        return [m for b in self._ordered(None) for m in self._reader(b).successors(id)]

    def history(
        self, id: str, *, limit: int | None = None, page: int = 1
    ) -> History:
        """Every version along the chain ending at ``id`` (``supersedes`` and renames back to the
        root), oldest first, with its content; ``limit``: only the newest ``limit`` of page
        ``page`` are read (``earlier`` counts those before)."""
        check_id(id)
        whole_number("limit", 1 if limit is None else limit, 1)
        whole_number("page", page, 1)
        warnings: builtins.list[str] = []
        renamed: dict[str, str] = {}  # an id a memory was renamed from -> that memory
        try:
            current = self.get(id) or self._last_known(id)
        except GitmemError as exc:
            # A file broken now still has a history worth seeing (to restore from).
            warnings.append(f"{id} cannot be read now, so its supersedes link is unknown: {exc}")
            ids = [id]
        else:
            if current is None:
                raise NotFoundError(f"no memory {id} in this store or its history")
            chain = walk_back(
                current, lambda other: self._predecessor(other, warnings), link=earlier
            )
            warnings.extend(chain.warnings)
            ids = chain.ids
            renamed = {m.extra[RENAMED_FROM]: m.id for m in chain if earlier(m) != m.supersedes}
        # Steps follow the commits (many land within one second, and a hand commit's
        # clock may disagree with gitmem's); only separate scopes are merged by time.
        steps = builtins.list(
            heapq.merge(
                *(self._steps_of(b, ids) for b in self._ordered(None)),
                key=lambda step: step[0].time,
            )
        )
        if not steps:
            raise NotFoundError(f"no memory {id} in this store or its history")
        # A rename is one step, as in git log --follow: not a delete of the old id too.
        first: dict[str, str] = {}
        for v, _, _ in steps:
            first.setdefault(v.memory_id, v.commit)
        steps = [
            (v, versions, backend)
            for v, versions, backend in steps
            if not (v.source is None and first.get(renamed.get(v.memory_id, "")) == v.commit)
        ]
        before = 0
        if limit is not None:
            end = max(0, len(steps) - (page - 1) * limit)
            before = max(0, end - limit)
            steps = steps[before:end]
        out = [self._content(v, versions, backend, warnings) for v, versions, backend in steps]
        for warning in warnings:
            log.warning("%s", warning)
        return History(out, warnings, earlier=before)

    def _steps_of(
        self, backend: Backend, ids: Sequence[str]
    ) -> builtins.list[tuple[Version, memory_versions.Versions, Backend]]:
        """The steps of ``ids``' files in one scope, content unread, each with its memory's
        versions so far (gitmem.store.memory_versions): exact along one line of history; where
        branches ran side by side, a step counts what came before it in this order."""
        counted: dict[str, memory_versions.Versions] = {}
        out: builtins.list[tuple[Version, memory_versions.Versions, Backend]] = []
        for step in self._reader(backend).versions(ids):
            versions = counted.get(step.memory_id, memory_versions.Versions())
            if step.counted:
                versions = counted[step.memory_id] = versions.plus(int(step.time.timestamp()))
            out.append((step, versions, backend))
        return out

    def _content(
        self,
        step: Version,
        versions: memory_versions.Versions,
        backend: Backend,
        warnings: builtins.list[str],
    ) -> Version:
        """``step`` with its content read and numbered; a deletion (or a file that does
        not read) has no version of its own."""
        if step.source is not None:
            blob, path = step.source
            try:
                data = blob_data(backend.db.repo, pygit2.Oid(hex=blob))
                memory = versions.apply(self._decode(backend, data, path))
            except GitmemError as exc:
                warnings.append(f"{path} at {step.commit[:12]} is not readable: {exc}")
            else:
                return replace(step, version=memory.version, memory=memory, source=None)
        return replace(step, version=None, source=None)
