"""Where things live in a store: id <-> path, and the guards that keep ids safe.

Two kinds of id:

* plain ids (``mem_<uuid4>`` or any safe name) live at ``memories/<shard>/<id>.md``;
* path ids (``projects/acme/known_issues``, ``entities/person/ada``) name a document
  by where it lives: the first segment is one of :data:`DOCUMENT_ROOTS`, the file
  is ``<id>.md``. Layered documents, knowledge-graph entities and memory-tool notes
  are addressed this way because their place in the tree *is* their identity.

Every id that reaches a path goes through :func:`check_id` first, so no id can
name a file outside its directory (``..``, ``\\``, percent-escapes, control
characters, absolute paths, empty segments are all refused before any path is
built; ``/`` only separates the segments of a path id).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid

from gitmem.base.errors import AmbiguousIdError, InvalidIdError

MEMORIES_DIR = "memories"
CONFIG_FILE = "gitmem.yaml"
ATTRIBUTES_FILE = ".gitattributes"
MEMORY_SUFFIX = ".md"
KEEP_FILE = ".gitkeep"
"""The empty file that keeps an otherwise empty folder of a document root in git's tree
(:meth:`gitmem.store.core.Store.keep_folder`); not a memory."""
MAX_ID_LENGTH = 200
MAX_PATH_DEPTH = 8

DOCUMENT_ROOTS: tuple[str, ...] = ("projects", "skills", "commands", "agents", "entities", "notes")
"""Top-level folders whose ``*.md`` files are documents with path ids."""

MEMORY_ROOTS: tuple[str, ...] = (MEMORIES_DIR, *DOCUMENT_ROOTS)
"""Every top-level folder that holds memory files (anything else is not a memory)."""

_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MEM_HEX_RE = re.compile(r"mem_([0-9a-f]{2})")


def new_id() -> str:
    return f"mem_{uuid.uuid4()}"


def is_path_id(memory_id: str) -> bool:
    """True for a path id (``projects/acme/known_issues``), False for a plain one."""
    return "/" in memory_id


def check_id(value: object, *, what: str = "id") -> str:
    """Return the id unchanged if it is safe to turn into a file name, else raise InvalidIdError."""
    if not isinstance(value, str):
        raise InvalidIdError(f"{what} must be a string, not {type(value).__name__}")
    if not value:
        raise InvalidIdError(f"{what} is empty")
    shown = ascii(value)
    if len(value) > MAX_ID_LENGTH:
        raise InvalidIdError(f"{what} {shown[:40]}… is longer than {MAX_ID_LENGTH} characters")
    if any(unicodedata.category(c) in {"Cc", "Cf", "Cs", "Co", "Cn"} for c in value):
        raise InvalidIdError(f"{what} {shown} contains control or invisible characters")
    if "/" in value and "\\" not in value:
        segments = value.split("/")
        if segments[0] not in DOCUMENT_ROOTS:
            raise InvalidIdError(
                f"{what} {shown} contains a path separator; path ids start with one of "
                + ", ".join(f"{root}/" for root in DOCUMENT_ROOTS)
            )
        if len(segments) < 2 or len(segments) > MAX_PATH_DEPTH:
            raise InvalidIdError(f"{what} {shown} must have 2 to {MAX_PATH_DEPTH} segments")
        for segment in segments:
            _check_segment(segment, value, what)
        return value
    _check_segment(value, value, what)
    return value


def _check_segment(segment: str, value: str, what: str) -> None:
    shown = ascii(value)
    if not segment:
        raise InvalidIdError(f"{what} {shown} has an empty path segment")
    if "/" in segment or "\\" in segment:
        raise InvalidIdError(f"{what} {shown} contains a path separator")
    if ".." in segment:
        raise InvalidIdError(f"{what} {shown} contains '..'")
    if "%" in segment:
        raise InvalidIdError(f"{what} {shown} contains '%' (percent-escapes are not decoded)")
    if not _ID_RE.fullmatch(segment):
        raise InvalidIdError(
            f"{what} {shown} is not allowed: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
            + (" (in each '/'-separated segment)" if segment != value else "")
        )
    if segment.lower().endswith(MEMORY_SUFFIX):
        raise InvalidIdError(f"{what} {shown} must not end in {MEMORY_SUFFIX!r}")


def shard(memory_id: str) -> str:
    """The two-character shard directory that keeps every tree object small.

    ``mem_<uuid>`` ids shard by their first two hex digits so a person can find
    the file by eye; any other id shards by a hash of the id.
    """
    match = _MEM_HEX_RE.match(memory_id)
    if match:
        return match.group(1)
    return hashlib.sha1(memory_id.encode("utf-8")).hexdigest()[:2]


def memory_path(memory_id: str) -> str:
    check_id(memory_id)
    if is_path_id(memory_id):
        return f"{memory_id}{MEMORY_SUFFIX}"
    return f"{MEMORIES_DIR}/{shard(memory_id)}/{memory_id}{MEMORY_SUFFIX}"


def is_memory_file(path: str) -> bool:
    """Whether a file at ``path`` is meant to be a memory (and is a problem if it is not one).

    Everything under ``memories/`` is; under a document root only ``*.md`` files are,
    so a README.txt or an image beside layered documents is left alone.
    """
    root, sep, _rest = path.partition("/")
    if not sep:
        return False
    if root == MEMORIES_DIR:
        return True
    return root in DOCUMENT_ROOTS and path.endswith(MEMORY_SUFFIX)


def expected_path_form(path: str) -> str:
    """How a memory path should look, for the error about a file that is not at one."""
    if path.startswith(f"{MEMORIES_DIR}/"):
        return "memories/<shard>/<id>.md"
    return "<root>/<segment>/.../<name>.md with safe segment names"


def id_from_path(path: str) -> str | None:
    """The id a memory file at ``path`` must carry, or None if the path is not a memory path."""
    root = path.partition("/")[0]
    if root in DOCUMENT_ROOTS:
        if not path.endswith(MEMORY_SUFFIX):
            return None
        candidate = path[: -len(MEMORY_SUFFIX)]
        try:
            return check_id(candidate)
        except InvalidIdError:
            return None
    parts = path.split("/")
    if len(parts) != 3 or parts[0] != MEMORIES_DIR or not parts[2].endswith(MEMORY_SUFFIX):
        return None
    memory_id = parts[2][: -len(MEMORY_SUFFIX)]
    try:
        check_id(memory_id)
    except InvalidIdError:
        return None
    if shard(memory_id) != parts[1]:
        return None
    return memory_id


def id_prefix(prefix: str) -> str:
    """The id part of what a person typed for an id: ``mem_5f0c...`` (as help texts write
    it) is the prefix ``mem_5f0c``; checked like every id (:func:`check_id`)."""
    wanted = prefix.removesuffix("...").removesuffix("\u2026") if prefix else prefix
    check_id(wanted)
    return wanted


def one_by_prefix(wanted: str, found: list[str]) -> str | None:
    """The one id of ``found`` (the ids starting with ``wanted``), None when there is none;
    several raise :class:`AmbiguousIdError` listing the first ten."""
    if len(found) == 1:
        return found[0]
    if not found:
        return None
    found = sorted(found)
    more = f" and {len(found) - 10} more" if len(found) > 10 else ""
    shown = ", ".join(found[:10]) + more
    raise AmbiguousIdError(
        f"id prefix {wanted} matches {len(found)} memories: {shown}",
        candidates=found,
        hint="give more characters of the id",
    )
