"""Claude's memory tool (``memory_20250818``) with a gitmem store behind it.

:class:`MemoryTool` runs the model's commands on the directory ``/memories`` as documents
under ``notes``, one commit each, as the SDK's ``BetaLocalFilesystemMemoryTool`` does.
Names map one to one onto path-id segments (docs/integrations.md); paths outside
``/memories``, ``..``, control characters and symbolic links are refused.
"""

from __future__ import annotations

import contextlib
import inspect
import re
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pygit2.enums import FileMode

from gitmem.base.errors import (
    AlreadyExistsError,
    GitmemError,
    InvalidInputError,
    NotFoundError,
    require_extra,
)
from gitmem.base.printable import printable
from gitmem.format import codec
from gitmem.format.layout import (
    KEEP_FILE,
    MAX_ID_LENGTH,
    MAX_PATH_DEPTH,
    MEMORY_SUFFIX,
    check_id,
)
from gitmem.format.model import DERIVED_KEYS, KNOWN_KEYS
from gitmem.format.secrets import SecretsFoundError, scan_text
from gitmem.format.versions import RENAMED_FROM
from gitmem.git.objects import Snapshot, tree_entry
from gitmem.store.core import Store

MEMORY_ROOT = "/memories"
NAME_KEY = "memory_file"
MAX_VIEW_LINES = 999_999  # the SDK's guard: a file of more lines is not shown

ESCAPE_PREFIX = "x--"


class MemoryToolError(InvalidInputError):
    """A memory-tool command that cannot be carried out; the message is for the model."""


class MemoryToolSecretError(MemoryToolError, SecretsFoundError):
    """A write refused for a credential, told with its line in the file the model sees."""


class MemoryToolNotFoundError(NotFoundError):
    """The path a memory-tool command names does not exist."""


def _escape(name: str) -> str:
    return re.sub(r"[^a-zA-Z0-9-]", lambda m: "_" + m[0].encode("utf-8").hex("_"), name)


def _escaped_name(segment: str) -> str | None:
    """The name ``segment`` is the escape of (``x--my_20notes`` -> ``my notes``), or None:
    not an escape, not the one :func:`_escape` makes, or a name no path can hold (empty,
    ``.``, ``..``, a ``/``, control or invisible characters)."""
    if not segment.startswith(ESCAPE_PREFIX):
        return None
    text = segment[len(ESCAPE_PREFIX) :]
    try:
        raw = re.sub(rb"_([0-9a-f]{2})", lambda m: bytes([int(m[1], 16)]), text.encode("ascii"))
        name = raw.decode("utf-8")
    except UnicodeError:
        return None
    if name in {"", ".", ".."} or "/" in name or ESCAPE_PREFIX + _escape(name) != segment:
        return None
    return None if any(unicodedata.category(c)[0] == "C" for c in name) else name


def _plain(name: str) -> bool:
    """Whether ``name`` is stored as itself: a safe path-id segment that is no escape."""
    try:
        check_id(name)
    except GitmemError:
        return False
    return _escaped_name(name) is None


def dir_segment(name: str) -> str:
    """The path-id segment a directory named ``name`` is stored under."""
    return name if _plain(name) else ESCAPE_PREFIX + _escape(name)


def dir_name(segment: str) -> str:
    """The directory name a stored segment shows as (the inverse of :func:`dir_segment`)."""
    name = _escaped_name(segment)
    return segment if name is None else name


def file_segment(name: str) -> str:
    """The path-id segment (file ``<segment>.md``) a file named ``name`` is stored under."""
    if name.endswith(MEMORY_SUFFIX) and _plain(name[: -len(MEMORY_SUFFIX)]):
        return name[: -len(MEMORY_SUFFIX)]
    return ESCAPE_PREFIX + _escape(name)


DIR_SIZE = 4096
"""A folder's size in a listing: its own inode's ``st_size``, as the SDK's tool shows it."""


def _size(n: int) -> str:
    """Human-readable size, as the SDK's own memory tool shows them (``10B``, ``2K``, ``1.5M``)."""
    value, unit = float(n), "B"
    for bigger in ("K", "M", "G"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{int(value)}{unit}" if value == int(value) else f"{value:.1f}{unit}"


def _numbered(lines: Sequence[str], first: int) -> str:
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, first))


@dataclass(frozen=True)
class _Target:
    """Where a ``/memories`` path lives in the store: the path as the model wrote it (every
    message echoes it, as the SDK's do), the names below /memories, and the store folder
    /memories is (``notes``)."""

    given: str
    names: tuple[str, ...]
    root: str

    @property
    def is_root(self) -> bool:
        return not self.names

    @property
    def name(self) -> str:
        return self.names[-1]

    @property
    def path(self) -> str:
        """The path normalised (``/memories/a/b.md``): titles and commit messages."""
        return MEMORY_ROOT + "".join(f"/{n}" for n in self.names)

    @property
    def tree(self) -> str:  # the store folder a directory at this path is (notes/a/b)
        return "/".join([self.root, *map(dir_segment, self.names)])

    @property
    def parent_tree(self) -> str:
        return "/".join([self.root, *map(dir_segment, self.names[:-1])])

    @property
    def file_id(self) -> str:
        return f"{self.parent_tree}/{file_segment(self.name)}"

    def prefix(self, depth: int) -> _Target:
        """The ancestor ``depth`` names deep (0: /memories)."""
        return _Target("", self.names[:depth], self.root)


@dataclass
class _Doc:
    id: str
    name: str  # the file name the model sees
    body: str
    extra: dict[str, Any]


class MemoryTool:
    """The six memory-tool commands over a store, under ``root`` (default ``notes``): each
    returns the text the model sees, or raises :class:`MemoryToolError` with a message for it.
    """

    def __init__(self, store: Store, *, root: str = "notes", agent: str | None = None) -> None:
        segments = root.split("/") if isinstance(root, str) else []
        if not segments or segments[0] != "notes":
            raise InvalidInputError(f"memory-tool root {root!r} must be notes or a folder in it")
        for segment in segments:
            if not _plain(segment) or segment != dir_name(segment):
                raise InvalidInputError(f"memory-tool root {root!r} is not a safe folder name")
        self.store = store
        self.root = root
        self.agent = agent

    def _target(self, path: Any, what: str = "path") -> _Target:
        if not isinstance(path, str):
            raise MemoryToolError(f"The {what} must be a string")
        shown = ascii(path)[1:-1] if not path.isprintable() else path
        if not path.startswith(MEMORY_ROOT):
            raise MemoryToolError(f"Path must start with {MEMORY_ROOT}, got: {shown}")
        if path != MEMORY_ROOT and not path.startswith(MEMORY_ROOT + "/"):
            # The SDK takes /memoriesx/a.md for /memories/x/a.md; gitmem does not guess.
            raise MemoryToolError(
                f"Path must be {MEMORY_ROOT} or start with {MEMORY_ROOT}/, got: {shown}"
            )
        if any(unicodedata.category(c)[0] == "C" for c in path):
            raise MemoryToolError(f"Path {shown} contains control or invisible characters")
        names: list[str] = []
        for name in path[len(MEMORY_ROOT) :].split("/"):
            if name in {"", "."}:
                continue  # a/./b, a//b and a trailing slash name what a file system finds
            if name != "..":
                names.append(name)
            elif not names:
                raise MemoryToolError(f"Path {shown} would escape {MEMORY_ROOT} directory")
            else:
                names.pop()
        if ".." in path.split("/"):
            raise MemoryToolError(
                f"Path {shown} contains '..': give the path without it "
                f"({MEMORY_ROOT}{''.join('/' + n for n in names)})"
            )
        target = _Target(path, tuple(names), self.root)
        depth = len(self.root.split("/")) + len(names)
        if depth > MAX_PATH_DEPTH:
            levels = MAX_PATH_DEPTH - len(self.root.split("/"))
            raise MemoryToolError(f"Path {shown} is nested too deeply (at most {levels} levels)")
        if names and max(len(target.tree), len(target.file_id)) > MAX_ID_LENGTH:
            raise MemoryToolError(
                f"Path {shown} is too long to store (a stored id has at most "
                f"{MAX_ID_LENGTH} characters; other characters than ASCII letters and "
                "digits take three each)"
            )
        return target

    def _snapshot(self, *targets: _Target) -> Snapshot:
        """The store now, refusing a target that passes through a symbolic link, in git's
        tree or on disk."""
        snap = self.store.db().snapshot()
        workdir = self.store.db().workdir
        for target in targets:
            parts = [*self.root.split("/"), *map(dir_segment, target.names)]
            places = ["/".join(parts[:i]) for i in range(1, len(parts) + 1)]
            if target.names:
                places.append(f"{target.file_id}{MEMORY_SUFFIX}")
            for place in places:
                entry = tree_entry(snap.tree, place) if snap.tree is not None else None
                linked = entry is not None and entry.filemode == FileMode.LINK
                if linked or (workdir is not None and (workdir / place).is_symlink()):
                    raise MemoryToolError(f"Path would escape {MEMORY_ROOT} directory via symlink")
        return snap

    def _doc_at(self, snap: Snapshot, doc_id: str) -> _Doc | None:
        data = snap.read(f"{doc_id}{MEMORY_SUFFIX}")
        if data is None:
            return None
        try:
            doc = codec.parse(codec.decode(data))
        except GitmemError as exc:
            raise MemoryToolError(
                f"The file for {doc_id} cannot be read: {printable(str(exc))}"
            ) from None
        meta = doc.metadata
        recorded = meta.get(NAME_KEY)
        stem = doc_id.rsplit("/", 1)[-1]
        name = recorded if isinstance(recorded, str) else f"{stem}{MEMORY_SUFFIX}"
        extra = {k: v for k, v in meta.items() if k not in _MANAGED}
        return _Doc(doc_id, name, doc.body, extra)

    def _file(self, snap: Snapshot, target: _Target) -> _Doc | None:
        """The document the model calls ``target``, or None (a different name sharing its
        place does not count)."""
        doc = None if target.is_root else self._doc_at(snap, target.file_id)
        return doc if doc is not None and doc.name == target.name else None

    def _is_dir(self, snap: Snapshot, target: _Target) -> bool:
        return target.is_root or self._holds_anything(snap, target.tree)

    def _taken(self, snap: Snapshot, target: _Target) -> bool:
        return self._is_dir(snap, target) or self._file(snap, target) is not None

    def _holds_anything(self, snap: Snapshot, tree: str) -> bool:
        """Whether the folder holds a memory or is kept empty (a ``.gitkeep`` below it)."""
        return any(self._under(snap, tree))

    def _under(self, snap: Snapshot, tree: str) -> tuple[list[str], list[str]]:
        """The memory ids and the kept-empty folders below ``tree`` (itself included)."""
        paths = list(snap.iter_files(tree))
        docs = [p[: -len(MEMORY_SUFFIX)] for p in paths if p.endswith(MEMORY_SUFFIX)]
        kept = [p[: -len(KEEP_FILE) - 1] for p in paths if p.rsplit("/", 1)[-1] == KEEP_FILE]
        return docs, kept

    def _require_file(self, snap: Snapshot, target: _Target) -> _Doc:
        doc = self._file(snap, target)
        if doc is None:
            if self._is_dir(snap, target):
                raise MemoryToolError(f"The path {target.given} is not a file.")
            raise MemoryToolNotFoundError(
                f"The path {target.given} does not exist. Please provide a valid path."
            )
        return doc

    def view(self, path: str, view_range: Sequence[int] | None = None) -> str:
        target = self._target(path)
        snap = self._snapshot(target)
        doc = self._file(snap, target)
        if doc is None and self._is_dir(snap, target):
            return self._view_dir(snap, target)  # the SDK ignores view_range for a directory
        return self._view_file(target, doc or self._require_file(snap, target), view_range)

    def _view_file(self, target: _Target, doc: _Doc, view_range: Sequence[int] | None) -> str:
        # As the SDK shows a file: a final newline gives a last, empty line, and a view_range
        # is clamped, not refused (models ask for [1, 200] on short files).
        lines = doc.body.split("\n")
        if len(lines) > MAX_VIEW_LINES:
            raise MemoryToolError(
                f"File {target.given} exceeds maximum line limit of {MAX_VIEW_LINES:,} lines."
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
        return f"Here's the content of {target.given} with line numbers:\n" + _numbered(
            lines, first
        )

    def _view_dir(self, snap: Snapshot, target: _Target) -> str:
        # Files (by the names the model gave) and directories, kept-empty ones included, as
        # the SDK shows them: two levels deep, hidden names left out, depth first by name.
        base = target.tree
        entries: dict[tuple[tuple[str, ...], str], int] = {}  # (names, "/" for a folder) -> size
        for path in snap.iter_files(base):
            rel = path[len(base) + 1 :].split("/")
            folders = tuple(dir_name(segment) for segment in rel[:-1])
            if path.endswith(MEMORY_SUFFIX) and rel[-1] != KEEP_FILE:
                doc = self._doc_at(snap, path[: -len(MEMORY_SUFFIX)])
                assert doc is not None  # a regular file iter_files found
                entries[(*folders, doc.name), ""] = len(doc.body.encode("utf-8"))
            elif rel[-1] != KEEP_FILE:
                continue  # not a memory: no file the model made
            entries.update(
                ((folders[:depth], "/"), DIR_SIZE) for depth in range(1, len(folders) + 1)
            )
        shown = sorted(
            (key, size, slash)
            for (key, slash), size in entries.items()
            if len(key) <= 2 and not any(name.startswith(".") for name in key)
        )
        lines = [f"{_size(DIR_SIZE)}\t{target.given}"]
        # A name read from the store (a teammate's memory_file) is escaped: one line each.
        lines.extend(
            f"{_size(size)}\t{target.given}/{'/'.join(map(printable, key))}{slash}"
            for key, size, slash in shown
        )
        return (
            f"Here're the files and directories up to 2 levels deep in {target.given}, "
            "excluding hidden items:\n" + "\n".join(lines)
        )

    def create(self, path: str, file_text: str) -> str:
        target = self._target(path)
        if not isinstance(file_text, str):
            raise MemoryToolError("file_text must be a string")
        snap = self._snapshot(target)
        self._check_free(snap, target, "File {} already exists")
        with (
            self._writing(target, file_text),
            self.store.transaction(message=f"memory tool: create {target.path}") as tx,
        ):
            self._create(target, file_text, {})
            self._unkeep_above(tx.snapshot, target)
        return f"File created successfully at: {target.given}"

    def _check_free(self, snap: Snapshot, target: _Target, taken: str) -> None:
        """Refuse a path something is at (``taken`` with the path), or that cannot be made."""
        if self._taken(snap, target):
            raise MemoryToolError(taken.format(target.given))
        for depth in range(1, len(target.names)):  # an ancestor that is a file
            if self._file(snap, above := target.prefix(depth)) is not None:
                raise MemoryToolError(
                    f"The path {target.given} cannot be made: {above.path} is a file"
                )

    @contextlib.contextmanager
    def _writing(self, target: _Target, body: str | None = None) -> Iterator[None]:
        """The store's refusals of a write, told in terms of /memories (``body``: the file's
        text as the model wrote it, to name a credential's line in it)."""
        try:
            yield
        except MemoryToolError:
            raise
        except SecretsFoundError as exc:
            first = exc.findings[0]
            seen = [f for f in scan_text(body) if f.kind == first.kind] if body else []
            if not seen:  # in the path, or found by a pattern of the store's own
                what = exc.message.partition(" looks like it holds a secret")[0]
                raise MemoryToolSecretError(
                    f"{target.given} was not changed: {what}", exc.findings
                ) from None
            findings = [replace(first, line=seen[0].line), *exc.findings[1:]]
            raise MemoryToolSecretError(f"{target.given} was not changed: it", findings) from None
        except AlreadyExistsError as exc:
            if "differs only in case" in exc.message:
                raise MemoryToolError(
                    f"The path {target.given} cannot be made: a file or directory whose name "
                    "differs from it only in letter case exists (on a case-insensitive file "
                    "system the two would be one)"
                ) from None
            raise MemoryToolError(
                f"The path {target.given} cannot be made: {exc.message}"
            ) from None
        except InvalidInputError as exc:
            raise MemoryToolError(f"{target.given} was not changed: {exc.message}") from None

    def _create(
        self, target: _Target, body: str, extra: Mapping[str, Any], *, doc_id: str | None = None
    ) -> None:
        fields = dict(extra)
        doc_id = doc_id or target.file_id
        if target.name != doc_id.rsplit("/", 1)[-1] + MEMORY_SUFFIX:
            fields[NAME_KEY] = target.name
        self.store.create(  # an empty file is a file, as on a disk
            body,
            id=doc_id,
            title=target.path,
            agent=self.agent,
            extra=fields or None,
            allow_empty=True,
        )

    def _unkeep_above(self, snap: Snapshot, target: _Target) -> None:
        """A directory that now holds something is no longer kept empty."""
        for depth in range(1, len(target.names)):
            folder = target.prefix(depth).tree
            if snap.exists(f"{folder}/{KEEP_FILE}"):
                self.store.keep_folder(folder, keep=False)

    def _keep_if_empty(self, snap: Snapshot, folder: str) -> None:
        """A directory a delete or a rename emptied stays, as on a file system."""
        if folder != self.root and not self._holds_anything(snap, folder):
            self.store.keep_folder(folder)

    def str_replace(self, path: str, old_str: str, new_str: str) -> str:
        target = self._target(path)
        if not isinstance(old_str, str) or not isinstance(new_str, str):
            raise MemoryToolError("old_str and new_str must be strings")
        snap = self._snapshot(target)
        doc = self._require_file(snap, target)
        if not old_str:
            raise MemoryToolError("old_str must not be empty")
        content = doc.body
        count = content.count(old_str)
        if count == 0:
            raise MemoryToolError(
                f"No replacement was performed, old_str `{old_str}` did not appear verbatim "
                f"in {target.given}."
            )
        if count > 1:
            found = re.finditer(f"(?={re.escape(old_str)})", content)  # overlapping, as the SDK
            lines = [str(content.count("\n", 0, m.start()) + 1) for m in found]
            raise MemoryToolError(
                f"No replacement was performed. Multiple occurrences of old_str `{old_str}` in "
                f"lines: {', '.join(lines)}. Please ensure it is unique"
            )
        pos = content.find(old_str)
        new_content = content.replace(old_str, new_str, 1)
        self._update(snap, target, doc, new_content, f"memory tool: edit {target.path}")
        # The SDK's snippet: two lines either side of the line the change starts on.
        changed = content.count("\n", 0, pos)
        new_lines = new_content.split("\n")
        low = max(0, changed - 2)
        return (
            "The memory file has been edited. Here is the snippet showing the change "
            "(with line numbers):\n" + _numbered(new_lines[low : changed + 3], low + 1)
        )

    def _update(self, snap: Snapshot, target: _Target, doc: _Doc, body: str, message: str) -> None:
        # The version as of snap's commit (derived from history, not in the file), so a write
        # since then still fails the check.
        with self._writing(target, body):
            at = str(snap.commit.id) if snap.commit is not None else None
            read = self.store.get(doc.id, at=at, scope=self.store.default_scope)
            self.store.update(
                doc.id,
                body,
                expected_version=read.version if read is not None else None,
                agent=self.agent,
                message=message,
                allow_empty=True,
            )

    def insert(self, path: str, insert_line: int, insert_text: str) -> str:
        target = self._target(path)
        if not isinstance(insert_text, str):
            raise MemoryToolError("insert_text must be a string")
        if not isinstance(insert_line, int) or isinstance(insert_line, bool):
            raise MemoryToolError("insert_line must be an integer")
        snap = self._snapshot(target)
        doc = self._require_file(snap, target)
        lines = doc.body.split("\n")
        if lines[-1] == "":
            lines.pop()
        if insert_line < 0 or insert_line > len(lines):
            raise MemoryToolError(
                f"Invalid `insert_line` parameter: {insert_line}. It should be within the range "
                f"[0, {len(lines)}]."
            )
        lines.insert(insert_line, insert_text.rstrip("\n"))
        new_content = "\n".join(lines)
        if not new_content.endswith("\n"):  # as the SDK: a final newline, never a second
            new_content += "\n"
        self._update(snap, target, doc, new_content, f"memory tool: insert into {target.path}")
        return f"The file {target.given} has been edited."

    def delete(self, path: str) -> str:
        target = self._target(path)
        if target.is_root:
            raise MemoryToolError(f"Cannot delete the {MEMORY_ROOT} directory itself")
        snap = self._snapshot(target)
        doc = self._file(snap, target)
        if doc is None and not self._is_dir(snap, target):
            raise MemoryToolNotFoundError(f"The path {target.given} does not exist")
        with self.store.transaction(message=f"memory tool: delete {target.path}") as tx:
            if doc is not None:
                self.store.delete(doc.id, agent=self.agent)
            else:
                self._remove_under(snap, target.tree)
            self._keep_if_empty(tx.snapshot, target.parent_tree)
        return f"Successfully deleted {target.given}"

    def _remove_under(self, snap: Snapshot, tree: str) -> None:
        """Delete every file and kept-empty folder below ``tree``."""
        docs, kept = self._under(snap, tree)
        for doc_id in docs:
            self.store.delete(doc_id, agent=self.agent)
        for folder in kept:
            self.store.keep_folder(folder, keep=False)

    def rename(self, old_path: str, new_path: str) -> str:
        old = self._target(old_path, "old_path")
        new = self._target(new_path, "new_path")
        if old.is_root:
            raise MemoryToolError(f"Cannot rename the {MEMORY_ROOT} directory itself")
        snap = self._snapshot(old, new)
        if self._taken(snap, new):
            raise MemoryToolError(f"The destination {new.given} already exists")
        doc = self._file(snap, old)
        if doc is None and not self._is_dir(snap, old):
            raise MemoryToolNotFoundError(f"The path {old.given} does not exist")
        if doc is None and new.names[: len(old.names)] == old.names:
            raise MemoryToolError(f"Cannot move {old.given} into itself ({new.given})")
        self._check_free(snap, new, "The destination {} already exists")
        with (
            self._writing(new, doc.body if doc is not None else None),
            self.store.transaction(message=f"memory tool: rename {old.path} to {new.path}") as tx,
        ):
            if doc is not None:
                self.store.delete(doc.id, agent=self.agent)
                self._create(new, doc.body, {**doc.extra, RENAMED_FROM: doc.id})
            else:
                self._move_dir(snap, old, new)
            self._unkeep_above(tx.snapshot, new)
            self._keep_if_empty(tx.snapshot, old.parent_tree)
        return f"Successfully renamed {old.given} to {new.given}"

    def _move_dir(self, snap: Snapshot, old: _Target, new: _Target) -> None:
        """Every file and kept-empty directory below ``old`` to the same place below
        ``new``: the stored segments below it do not change, only the folder they are in."""
        docs, kept = self._under(snap, old.tree)
        for doc_id in docs:
            moved = self._doc_at(snap, doc_id)
            assert moved is not None  # a regular file iter_files found
            rel = doc_id[len(old.tree) + 1 :].split("/")
            names = (*new.names, *map(dir_name, rel[:-1]), moved.name)
            self.store.delete(doc_id, agent=self.agent)
            self._create(
                _Target("", names, self.root),
                moved.body,
                {**moved.extra, RENAMED_FROM: doc_id},
                doc_id=f"{new.tree}/{'/'.join(rel)}",
            )
        for folder in kept:
            self.store.keep_folder(folder, keep=False)
            self.store.keep_folder(new.tree + folder[len(old.tree) :])

    def clear_all_memory(self) -> str:
        """Delete every file under /memories in one commit (history keeps them)."""
        snap = self._snapshot()
        if self._holds_anything(snap, self.root):
            with self.store.transaction(message=f"memory tool: clear {MEMORY_ROOT}"):
                self._remove_under(snap, self.root)
        return "All memory cleared"

    def execute(self, command: Mapping[str, Any]) -> str:
        """Run one tool call, given its input as Claude sends it (``{"command": "view", ...}``)."""
        if not isinstance(command, Mapping):
            raise MemoryToolError("the tool input must be an object")
        name = command.get("command")
        if name not in _COMMANDS:
            raise MemoryToolError(f"Unknown command {name!r}: use one of {', '.join(_COMMANDS)}")
        params = inspect.signature(getattr(self, name)).parameters
        missing = [k for k, p in params.items() if p.default is p.empty and k not in command]
        if missing:
            raise MemoryToolError(f"{name} needs {', '.join(missing)}")
        return str(getattr(self, name)(**{k: command[k] for k in params if k in command}))


_COMMANDS = ("view", "create", "str_replace", "insert", "delete", "rename")
# Front-matter gitmem manages; the validity window and unknown keys move with a rename.
_MANAGED = {*KNOWN_KEYS, *DERIVED_KEYS, NAME_KEY, RENAMED_FROM} - {"valid_from", "valid_until"}


def _run(backend: MemoryTool, command: Any) -> str:
    """One of the SDK's typed commands (None: clear all), a failure as the SDK's ToolError."""
    from anthropic.lib.tools import ToolError

    try:
        return backend.execute(command.model_dump()) if command else backend.clear_all_memory()
    except GitmemError as exc:
        raise ToolError(exc.message) from exc


def anthropic_memory_tool(
    store: Store,
    *,
    root: str = "notes",
    agent: str | None = None,
    asynchronous: bool = False,
    **kwargs: Any,
) -> Any:
    """A ``BetaAbstractMemoryTool`` for the Anthropic SDK's tool runner, backed by ``store``
    (``asynchronous``: a ``BetaAsyncAbstractMemoryTool`` whose store work runs in a worker
    thread). Needs the ``anthropic`` extra. Errors come back to the model as the SDK's
    ``ToolError`` with :class:`MemoryTool`'s message; ``kwargs`` go to the SDK class."""
    require_extra("anthropic", "the memory tool's adapter", "anthropic")
    import anyio.to_thread
    from anthropic.lib import tools

    backend = MemoryTool(store, root=root, agent=agent)

    def run(self: Any, command: Any = None) -> str:
        return _run(backend, command)

    async def run_async(self: Any, command: Any = None) -> str:
        return await anyio.to_thread.run_sync(_run, backend, command)

    base = tools.BetaAsyncAbstractMemoryTool if asynchronous else tools.BetaAbstractMemoryTool
    methods = dict.fromkeys((*_COMMANDS, "clear_all_memory"), run_async if asynchronous else run)
    return type("GitmemMemoryTool", (base,), {"memory": backend, **methods})(**kwargs)


def anthropic_async_memory_tool(store: Store, **kwargs: Any) -> Any:
    """:func:`anthropic_memory_tool` for the SDK's async runner."""
    return anthropic_memory_tool(store, asynchronous=True, **kwargs)
