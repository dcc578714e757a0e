"""Claude's memory tool (``memory_20250818``) with a gitmem store behind it.

The model sees a directory ``/memories`` and runs six commands on it: ``view``,
``create``, ``str_replace``, ``insert``, ``delete``, ``rename``.
:class:`MemoryTool` carries them out on documents under the ``notes`` root
(or a folder below it), every change one commit, so what the model remembers
is versioned, attributed and restorable like any other memory.

How ``/memories`` paths map to documents (path ids):

- ``/memories/<d1>/.../<name>`` is the document ``<root>/<d1>/.../<stem>``
  (file ``<root>/<d1>/.../<stem>.md``), where ``<stem>`` is ``<name>`` without
  a final ``.md``; so ``/memories/notes/todo.md`` is ``notes/notes/todo.md``
  on disk, and ``/memories/prefs.xml`` is ``notes/prefs.xml.md``. A file
  whose name is not ``<stem>.md`` records its name in the front-matter key
  ``memory_file``, so the two names that share a place (``prefs.xml`` and
  ``prefs.xml.md``) are told apart and the second is refused, never mixed up;
- the file's content is the document's body, byte for byte; the front-matter
  (id, times, version, title = the ``/memories`` path) is gitmem's and the
  model never sees it;
- every segment must be a safe path-id segment: letters, digits, ``.``, ``_``,
  ``-``, starting with a letter or digit. Anything else (spaces, ``..``, ``.``,
  empty segments, ``%``-escapes, backslashes, control characters, paths
  outside ``/memories``) is refused with a message saying why, before anything
  is read, and nothing is changed. So is a path that crosses a symbolic link
  in the store's tree or work tree, and a path deeper than path ids allow.
"""

from __future__ import annotations

import contextlib
import re
import unicodedata
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pygit2.enums import FileMode

from gitmem.base.errors import GitmemError, InvalidInputError, NotFoundError
from gitmem.format import codec
from gitmem.format.layout import DOCUMENT_ROOTS, MAX_PATH_DEPTH, MEMORY_SUFFIX
from gitmem.git.objects import Snapshot
from gitmem.store.core import Store

__all__ = [
    "MEMORY_ROOT",
    "MemoryTool",
    "MemoryToolError",
    "MemoryToolNotFoundError",
    "anthropic_async_memory_tool",
    "anthropic_memory_tool",
]

MEMORY_ROOT = "/memories"
NOTES_ROOT = "notes"
assert NOTES_ROOT in DOCUMENT_ROOTS
NAME_KEY = "memory_file"
LINE_NUMBER_WIDTH = 6
MAX_VIEW_LINES = 999_999
"""The SDK's guard: a file of more lines is not shown."""
_SEGMENT_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


class MemoryToolError(InvalidInputError):
    """A memory-tool command that cannot be carried out; the message is for the model."""


class MemoryToolNotFoundError(NotFoundError):
    """The path a memory-tool command names does not exist."""


@dataclass(frozen=True)
class _Target:
    """Where a ``/memories`` path lives in the store."""

    path: str
    """The path as the model wrote it, normalised (no trailing slash)."""
    segments: tuple[str, ...]
    """Its segments below /memories (empty for /memories itself)."""
    tree: str
    """The store folder a directory at this path is (``notes/a/b``)."""

    @property
    def is_root(self) -> bool:
        return not self.segments

    @property
    def name(self) -> str:
        return self.segments[-1]


def _stem(name: str) -> str:
    return name[: -len(MEMORY_SUFFIX)] if name.lower().endswith(MEMORY_SUFFIX) else name


def _size(n: int) -> str:
    """Human-readable size, as the SDK's own memory tool shows them (``10B``, ``2K``, ``1.5M``)."""
    value, unit = float(n), "B"
    for bigger in ("K", "M", "G"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{int(value)}{unit}" if value == int(value) else f"{value:.1f}{unit}"


def _numbered(lines: Sequence[str], first: int) -> str:
    return "\n".join(f"{n:>{LINE_NUMBER_WIDTH}}\t{line}" for n, line in enumerate(lines, first))


def _lines(content: str) -> list[str]:
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


@dataclass
class _Doc:
    id: str
    name: str
    """The file name the model sees."""
    body: str
    version: int
    extra: dict[str, Any]
    title: str | None


class MemoryTool:
    """The six memory-tool commands over a store, under ``root`` (default ``notes``).

    Each method returns the text the model should see, or raises
    :class:`MemoryToolError` / :class:`MemoryToolNotFoundError` with a message
    for it. ``execute`` takes the tool call's input mapping as Claude sends it.
    """

    def __init__(self, store: Store, *, root: str = "notes", agent: str | None = None) -> None:
        segments = root.split("/") if isinstance(root, str) else []
        if not segments or segments[0] != NOTES_ROOT:
            raise InvalidInputError(f"memory-tool root {root!r} must be notes or a folder in it")
        for segment in segments:
            if not _SEGMENT_RE.fullmatch(segment) or ".." in segment:
                raise InvalidInputError(f"memory-tool root {root!r} is not a safe folder name")
        self.store = store
        self.root = root
        self.agent = agent

    # -- paths ---------------------------------------------------------------------------

    def _target(self, path: Any, what: str = "path") -> _Target:
        if not isinstance(path, str):
            raise MemoryToolError(f"The {what} must be a string")
        shown = ascii(path) if not path.isprintable() else path
        if path != MEMORY_ROOT and not path.startswith(MEMORY_ROOT + "/"):
            raise MemoryToolError(
                f"The {what} {shown} is outside {MEMORY_ROOT}: paths must start with {MEMORY_ROOT}/"
            )
        if "%" in path:
            raise MemoryToolError(f"The {what} {shown} contains '%': percent-escapes are refused")
        if "\\" in path:
            raise MemoryToolError(f"The {what} {shown} contains a backslash")
        if any(unicodedata.category(c)[0] == "C" for c in path):
            raise MemoryToolError(f"The {what} {shown} contains control or invisible characters")
        rest = path[len(MEMORY_ROOT) + 1 :]
        if rest.endswith("/"):  # a directory may be written with a trailing slash
            rest = rest[:-1]
        segments = tuple(rest.split("/")) if rest else ()
        for segment in segments:
            if segment in {"", ".", ".."} or ".." in segment:
                raise MemoryToolError(
                    f"The {what} {shown} would escape or is not a plain path "
                    "('..', '.' and empty segments are refused)"
                )
            if not _SEGMENT_RE.fullmatch(segment):
                raise MemoryToolError(
                    f"The {what} {shown} has the name {segment!r}: use letters, digits, '.', '_' "
                    "and '-', starting with a letter or digit"
                )
        depth = len(self.root.split("/")) + len(segments)
        if depth > MAX_PATH_DEPTH:
            levels = MAX_PATH_DEPTH - len(self.root.split("/"))
            raise MemoryToolError(
                f"The {what} {shown} is nested too deeply (at most {levels} levels)"
            )
        if segments:
            stem = _stem(segments[-1])
            if not stem or stem.lower().endswith(MEMORY_SUFFIX) or not _SEGMENT_RE.fullmatch(stem):
                raise MemoryToolError(
                    f"The {what} {shown} cannot be stored: its name without .md is not a safe name"
                )
            for folder in segments[:-1]:
                if folder.lower().endswith(MEMORY_SUFFIX):
                    # notes/x.md/ would sit beside the file notes/x.md of /memories/x.md.
                    raise MemoryToolError(
                        f"The {what} {shown} has a directory named {folder!r}: directory "
                        "names cannot end in .md"
                    )
        normal = MEMORY_ROOT + "".join(f"/{s}" for s in segments)
        return _Target(normal, segments, "/".join([self.root, *segments]))

    def _doc_id(self, target: _Target) -> str:
        return "/".join([self.root, *target.segments[:-1], _stem(target.name)])

    def _check_links(self, snap: Snapshot, target: _Target) -> None:
        """Refuse a path that passes through a symbolic link, in git's tree or on disk."""
        parts = [*self.root.split("/"), *target.segments]
        places = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
        places.append(places[-1] + MEMORY_SUFFIX)
        workdir = self.store.db().workdir
        for place in places:
            entry = None
            if snap.tree is not None:
                with contextlib.suppress(KeyError):
                    entry = snap.tree[place]
            linked = entry is not None and entry.filemode == FileMode.LINK
            if linked or (workdir is not None and (workdir / place).is_symlink()):
                raise MemoryToolError(
                    f"The path {target.path} would escape {MEMORY_ROOT} via a symlink"
                )

    # -- reading ---------------------------------------------------------------------------

    def _snapshot(self) -> Snapshot:
        return self.store.db().snapshot()

    def _doc_at(self, snap: Snapshot, doc_id: str) -> _Doc | None:
        data = snap.read(f"{doc_id}{MEMORY_SUFFIX}")
        if data is None:
            return None
        try:
            doc = codec.parse(codec.decode(data))
        except GitmemError as exc:
            raise MemoryToolError(f"The file for {doc_id} cannot be read: {exc}") from None
        meta = doc.metadata
        recorded = meta.get(NAME_KEY)
        stem = doc_id.rsplit("/", 1)[-1]
        name = recorded if isinstance(recorded, str) else f"{stem}{MEMORY_SUFFIX}"
        version = meta.get("version")
        title = meta.get("title")
        extra = {k: v for k, v in meta.items() if k not in _MANAGED}
        return _Doc(
            doc_id,
            name,
            doc.body,
            version if isinstance(version, int) else 1,
            extra,
            title if isinstance(title, str) else None,
        )

    def _file(self, snap: Snapshot, target: _Target) -> _Doc | None:
        """The document the model calls ``target``, or None (a different name sharing its
        place does not count)."""
        if target.is_root:
            return None
        doc = self._doc_at(snap, self._doc_id(target))
        if doc is None or doc.name != target.name:
            return None
        return doc

    def _is_dir(self, snap: Snapshot, target: _Target) -> bool:
        if target.is_root:
            return True
        return next(iter(self._docs_under(snap, target.tree)), None) is not None

    def _docs_under(self, snap: Snapshot, tree: str) -> Iterator[str]:
        for path in snap.iter_files(tree):
            if path.endswith(MEMORY_SUFFIX):
                yield path[: -len(MEMORY_SUFFIX)]

    def _require_file(self, snap: Snapshot, target: _Target) -> _Doc:
        doc = self._file(snap, target)
        if doc is None:
            if self._is_dir(snap, target):
                raise MemoryToolError(f"The path {target.path} is a directory, not a file")
            raise MemoryToolNotFoundError(
                f"The path {target.path} does not exist. Please provide a valid path."
            )
        return doc

    # -- commands -------------------------------------------------------------------------

    def view(self, path: str, view_range: Sequence[int] | None = None) -> str:
        target = self._target(path)
        snap = self._snapshot()
        self._check_links(snap, target)
        doc = self._file(snap, target)
        if doc is not None:
            return self._view_file(target, doc, view_range)
        if not self._is_dir(snap, target):
            raise MemoryToolNotFoundError(
                f"The path {target.path} does not exist. Please provide a valid path."
            )
        return self._view_dir(snap, target)  # the SDK ignores view_range for a directory

    def _view_file(self, target: _Target, doc: _Doc, view_range: Sequence[int] | None) -> str:
        # As the SDK's local-filesystem tool shows a file: split on "\n" (a final newline gives
        # a last, empty line), the 999,999-line guard, and a view_range clamped, not refused
        # (models ask for [1, 200] on short files).
        lines = doc.body.split("\n")
        if len(lines) > MAX_VIEW_LINES:
            raise MemoryToolError(
                f"File {target.path} exceeds maximum line limit of {MAX_VIEW_LINES:,} lines."
            )
        first = 1
        if view_range is not None:
            if not isinstance(view_range, list | tuple) or not all(
                isinstance(n, int) and not isinstance(n, bool) for n in view_range
            ):
                raise MemoryToolError("view_range must be two line numbers: [start, end]")
            if len(view_range) == 2:
                start = max(1, view_range[0]) - 1
                end = len(lines) if view_range[1] == -1 else view_range[1]
                lines = lines[start:end]
                first = start + 1
        return f"Here's the content of {target.path} with line numbers:\n" + _numbered(lines, first)

    def _view_dir(self, snap: Snapshot, target: _Target) -> str:
        entries: dict[str, int] = {}
        total = 0
        base = target.tree
        for doc_id in self._docs_under(snap, base):
            rel = doc_id[len(base) + 1 :].split("/")
            doc = self._doc_at(snap, doc_id)
            if doc is None:
                continue
            size = len(doc.body.encode("utf-8"))
            total += size
            shown = [*rel[:-1], doc.name]
            if len(shown) <= 2:
                entries["/".join(shown)] = size
            for depth in range(1, min(len(shown), 3)):
                if depth < len(shown):
                    key = "/".join(shown[:depth]) + "/"
                    entries[key] = entries.get(key, 0) + size
        lines = [f"{_size(total)}\t{target.path}"]
        # The SDK's order: depth first, each folder's entries by name ("a/" and what is in it
        # before "a-b.md"), which is the order of the paths' segment tuples.
        ordered = sorted(entries, key=lambda key: tuple(key.rstrip("/").split("/")))
        lines.extend(f"{_size(entries[key])}\t{target.path}/{key}" for key in ordered)
        return (
            f"Here're the files and directories up to 2 levels deep in {target.path}, "
            "excluding hidden items:\n" + "\n".join(lines)
        )

    def create(self, path: str, file_text: str) -> str:
        target = self._target(path)
        if target.is_root:
            raise MemoryToolError(f"{MEMORY_ROOT} is a directory; give a file path below it")
        if not isinstance(file_text, str):
            raise MemoryToolError("file_text must be a string")
        snap = self._snapshot()
        self._check_links(snap, target)
        self._check_free(snap, target)
        self._create(target, file_text, {})
        return f"File created successfully at: {target.path}"

    def _check_free(self, snap: Snapshot, target: _Target) -> None:
        if self._file(snap, target) is not None:
            raise MemoryToolError(f"File {target.path} already exists")
        if self._is_dir(snap, target):
            raise MemoryToolError(f"{target.path} already exists as a directory")
        other = self._doc_at(snap, self._doc_id(target))
        if other is not None:
            shown = "/".join([MEMORY_ROOT, *target.segments[:-1], other.name])
            raise MemoryToolError(
                f"{target.path} cannot be created: it would be stored where {shown} is; "
                "choose another name"
            )
        for i in range(1, len(target.segments)):
            parent = _Target(
                MEMORY_ROOT + "".join(f"/{s}" for s in target.segments[:i]),
                target.segments[:i],
                "/".join([self.root, *target.segments[:i]]),
            )
            if self._file(snap, parent) is not None:
                raise MemoryToolError(f"{parent.path} is a file, so {target.path} cannot be made")

    def _create(self, target: _Target, body: str, extra: Mapping[str, Any]) -> None:
        fields = dict(extra)
        if target.name != f"{_stem(target.name)}{MEMORY_SUFFIX}":
            fields[NAME_KEY] = target.name
        else:
            fields.pop(NAME_KEY, None)
        self.store.create(
            body,
            id=self._doc_id(target),
            title=target.path,
            agent=self.agent,
            extra=fields or None,
            message=f"memory tool: create {target.path}",
        )

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        target = self._target(path)
        if not isinstance(old_str, str) or not isinstance(new_str, str):
            raise MemoryToolError("old_str and new_str must be strings")
        if not old_str:
            raise MemoryToolError("old_str must not be empty")
        snap = self._snapshot()
        self._check_links(snap, target)
        doc = self._require_file(snap, target)
        content = doc.body
        count = content.count(old_str)
        if count == 0:
            raise MemoryToolError(
                f"No replacement was performed, old_str `{old_str}` did not appear verbatim "
                f"in {target.path}."
            )
        if count > 1:
            lines, start = [], 0
            while (pos := content.find(old_str, start)) != -1:
                lines.append(content.count("\n", 0, pos) + 1)
                start = pos + 1
            raise MemoryToolError(
                f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in "
                f"lines: {', '.join(map(str, lines))}. Please ensure it is unique"
            )
        pos = content.find(old_str)
        new_content = content.replace(old_str, new_str, 1)
        self._update(doc, new_content, f"memory tool: edit {target.path}")
        changed = content.count("\n", 0, pos)
        new_lines = new_content.split("\n")
        low = max(0, changed - 2)
        high = min(len(new_lines), changed + new_str.count("\n") + 3)
        return (
            "The memory file has been edited. Here is the snippet showing the change "
            "(with line numbers):\n" + _numbered(new_lines[low:high], low + 1)
        )

    def _update(self, doc: _Doc, body: str, message: str) -> None:
        self.store.update(
            doc.id, body, expected_version=doc.version, agent=self.agent, message=message
        )

    def insert(self, path: str, insert_line: int, insert_text: str) -> str:
        target = self._target(path)
        if not isinstance(insert_text, str):
            raise MemoryToolError("insert_text must be a string")
        if not isinstance(insert_line, int) or isinstance(insert_line, bool):
            raise MemoryToolError("insert_line must be an integer")
        snap = self._snapshot()
        self._check_links(snap, target)
        doc = self._require_file(snap, target)
        lines = _lines(doc.body)
        if insert_line < 0 or insert_line > len(lines):
            raise MemoryToolError(
                f"Invalid `insert_line` parameter: {insert_line}. It should be within the range "
                f"[0, {len(lines)}]."
            )
        lines[insert_line:insert_line] = insert_text.rstrip("\n").split("\n")
        self._update(doc, "\n".join(lines) + "\n", f"memory tool: insert into {target.path}")
        return f"The file {target.path} has been edited."

    def delete(self, path: str) -> str:
        target = self._target(path)
        if target.is_root:
            raise MemoryToolError(f"Cannot delete the {MEMORY_ROOT} directory itself")
        snap = self._snapshot()
        self._check_links(snap, target)
        doc = self._file(snap, target)
        if doc is not None:
            self.store.delete(
                doc.id, agent=self.agent, message=f"memory tool: delete {target.path}"
            )
            return f"Successfully deleted {target.path}"
        ids = list(self._docs_under(snap, target.tree))
        if not ids:
            raise MemoryToolNotFoundError(f"The path {target.path} does not exist")
        with self.store.transaction(message=f"memory tool: delete {target.path}/"):
            for doc_id in ids:
                self.store.delete(doc_id, agent=self.agent)
        return f"Successfully deleted {target.path}"

    def rename(self, old_path: str, new_path: str) -> str:
        old = self._target(old_path, "old_path")
        new = self._target(new_path, "new_path")
        if old.is_root or new.is_root:
            raise MemoryToolError(f"Cannot rename the {MEMORY_ROOT} directory itself")
        snap = self._snapshot()
        self._check_links(snap, old)
        self._check_links(snap, new)
        doc = self._file(snap, old)
        if doc is None and not self._is_dir(snap, old):
            raise MemoryToolNotFoundError(f"The path {old.path} does not exist")
        if self._file(snap, new) is not None or self._is_dir(snap, new):
            raise MemoryToolError(f"The destination {new.path} already exists")
        if new.segments[: len(old.segments)] == old.segments:
            raise MemoryToolError(f"Cannot move {old.path} into itself ({new.path})")
        moves: list[tuple[_Doc, _Target]] = []
        if doc is not None:
            moves.append((doc, new))
        else:
            for doc_id in self._docs_under(snap, old.tree):
                moved = self._doc_at(snap, doc_id)
                if moved is None:
                    continue
                rel = doc_id[len(old.tree) + 1 :].split("/")
                segments = (*new.segments, *rel[:-1], moved.name)
                moves.append((moved, self._target("/".join([MEMORY_ROOT, *segments]), "new_path")))
        with self.store.transaction(message=f"memory tool: rename {old.path} to {new.path}") as tx:
            for moved, dest in moves:
                self._check_free(tx.snapshot, dest)
                self.store.delete(moved.id, agent=self.agent)
                extra = {**moved.extra, "renamed_from": moved.id}
                self._create(dest, moved.body, extra)
        return f"Successfully renamed {old.path} to {new.path}"

    def clear_all_memory(self) -> str:
        """Delete every file under /memories in one commit (history keeps them)."""
        snap = self._snapshot()
        ids = list(self._docs_under(snap, self.root))
        if ids:
            with self.store.transaction(message=f"memory tool: clear {MEMORY_ROOT}"):
                for doc_id in ids:
                    self.store.delete(doc_id, agent=self.agent)
        return "All memory cleared"

    def execute(self, command: Mapping[str, Any]) -> str:
        """Run one tool call, given its input as Claude sends it (``{"command": "view", ...}``)."""
        if not isinstance(command, Mapping):
            raise MemoryToolError("the tool input must be an object")
        name = command.get("command")
        spec = _COMMANDS.get(name) if isinstance(name, str) else None
        if spec is None:
            raise MemoryToolError(f"Unknown command {name!r}: use one of {', '.join(_COMMANDS)}")
        required, optional = spec
        missing = [key for key in required if key not in command]
        if missing:
            raise MemoryToolError(f"{name} needs {', '.join(missing)}")
        args = {key: command[key] for key in (*required, *optional) if key in command}
        result: str = getattr(self, str(name))(**args)
        return result


_COMMANDS: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "view": (("path",), ("view_range",)),
    "create": (("path", "file_text"), ()),
    "str_replace": (("path", "old_str", "new_str"), ()),
    "insert": (("path", "insert_line", "insert_text"), ()),
    "delete": (("path",), ()),
    "rename": (("old_path", "new_path"), ()),
}
_MANAGED = {
    "id", "title", "scope", "created_at", "updated_at", "version", "agent", "supersedes",
    "category", "tags", "related", "session_id", "trigger", "status", NAME_KEY, "renamed_from",
}  # fmt: skip


def _command_call(backend: MemoryTool, command: Any) -> Callable[[], str]:
    """The backend call for one of the SDK's typed memory-tool commands."""
    calls: dict[str, Callable[[], str]] = {
        "view": lambda: backend.view(command.path, command.view_range),
        "create": lambda: backend.create(command.path, command.file_text),
        "str_replace": lambda: backend.str_replace(command.path, command.old_str, command.new_str),
        "insert": lambda: backend.insert(command.path, command.insert_line, command.insert_text),
        "delete": lambda: backend.delete(command.path),
        "rename": lambda: backend.rename(command.old_path, command.new_path),
    }
    return calls[command.command]


def anthropic_memory_tool(
    store: Store, *, root: str = "notes", agent: str | None = None, **kwargs: Any
) -> Any:
    """A ``BetaAbstractMemoryTool`` for the Anthropic SDK's tool runner, backed by ``store``.

    Needs the ``anthropic`` extra. Errors come back to the model as the SDK's
    ``ToolError`` (an ``is_error`` tool result) with the message from
    :class:`MemoryTool`. ``kwargs`` go to the SDK class (``cache_control``).
    """
    from anthropic.lib.tools import BetaAbstractMemoryTool, ToolError

    backend = MemoryTool(store, root=root, agent=agent)

    def run(call: Callable[[], str]) -> str:
        try:
            return call()
        except GitmemError as exc:
            raise ToolError(exc.message) from exc

    class GitmemMemoryTool(BetaAbstractMemoryTool):
        """Claude's memory tool over a gitmem store: every change is a commit."""

        memory = backend

        def view(self, command: Any) -> str:
            return run(_command_call(backend, command))

        create = str_replace = insert = delete = rename = view

        def clear_all_memory(self) -> str:
            return run(backend.clear_all_memory)

    return GitmemMemoryTool(**kwargs)


def anthropic_async_memory_tool(
    store: Store, *, root: str = "notes", agent: str | None = None, **kwargs: Any
) -> Any:
    """The same as :func:`anthropic_memory_tool` for the SDK's async runner
    (``BetaAsyncAbstractMemoryTool``); the store's work runs in a worker thread."""
    import anyio.to_thread
    from anthropic.lib.tools import BetaAsyncAbstractMemoryTool, ToolError

    backend = MemoryTool(store, root=root, agent=agent)

    async def run(call: Callable[[], str]) -> str:
        try:
            return await anyio.to_thread.run_sync(call)
        except GitmemError as exc:
            raise ToolError(exc.message) from exc

    class GitmemAsyncMemoryTool(BetaAsyncAbstractMemoryTool):
        """Claude's memory tool over a gitmem store, for async clients."""

        memory = backend

        async def view(self, command: Any) -> str:
            return await run(_command_call(backend, command))

        create = str_replace = insert = delete = rename = view

        async def clear_all_memory(self) -> str:
            return await run(backend.clear_all_memory)

    return GitmemAsyncMemoryTool(**kwargs)
