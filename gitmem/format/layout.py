"""Where things live in a store: plain ids at ``memories/<ab>/<id>.md``, path ids
(``projects/acme/known_issues``) under :data:`DOCUMENT_ROOTS`; every id passes
:func:`check_id` before it becomes a path.
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
"""Keeps an empty folder of a document root in git's tree; not a memory."""
MAX_ID_LENGTH = 200
MAX_PATH_DEPTH = 8

DOCUMENT_ROOTS: tuple[str, ...] = ("projects", "skills", "commands", "agents", "entities", "notes")
"""Top-level folders whose ``*.md`` files are documents with path ids."""

MEMORY_ROOTS: tuple[str, ...] = (MEMORIES_DIR, *DOCUMENT_ROOTS)
"""Every top-level folder that holds memory files (anything else is not a memory)."""

_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MEM_HEX_RE = re.compile(r"mem_([0-9a-f]{2})")
_MEM_HEX4_RE = re.compile(r"mem_([0-9a-f]{4})")


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
    # Printable ASCII holds none of these categories: only other text is scanned.
    if not (value.isascii() and value.isprintable()) and any(
        unicodedata.category(c) in {"Cc", "Cf", "Cs", "Co", "Cn"} for c in value
    ):
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
    if ".." in segment:
        raise InvalidIdError(f"{what} {shown} contains '..'")
    if not _ID_RE.fullmatch(segment):
        raise InvalidIdError(
            f"{what} {shown} is not allowed: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
            + (" (in each '/'-separated segment)" if segment != value else "")
        )
    if segment.lower().endswith(MEMORY_SUFFIX):
        raise InvalidIdError(f"{what} {shown} must not end in {MEMORY_SUFFIX!r}")


def shard(memory_id: str) -> str:
    """The folder of a plain id below ``memories/``: the uuid's first two hex digits for
    ``mem_<uuid>`` ids (so a person finds the file by eye), else two of the id's SHA-1."""
    match = _MEM_HEX_RE.match(memory_id)
    if match:
        return match.group(1)
    return hashlib.sha1(memory_id.encode("utf-8")).hexdigest()[:2]


def memory_path(memory_id: str) -> str:
    """Where memory ``memory_id`` lives: ``memories/<ab>/<id>.md``, or a path id's own
    path (``projects/acme/known_issues.md``)."""
    check_id(memory_id)
    if is_path_id(memory_id):
        return f"{memory_id}{MEMORY_SUFFIX}"
    return f"{MEMORIES_DIR}/{shard(memory_id)}/{memory_id}{MEMORY_SUFFIX}"


def format4_path(memory_id: str) -> str | None:
    """Where format 4 put a plain id (``memories/a/b/c/d/<id>.md``); None for a path id.
    Only for reading history from before ``gitmem migrate``."""
    if is_path_id(memory_id):
        return None
    match = _MEM_HEX4_RE.match(memory_id)
    digits = match.group(1) if match else hashlib.sha1(memory_id.encode("utf-8")).hexdigest()[:4]
    return f"{MEMORIES_DIR}/{'/'.join(digits)}/{memory_id}{MEMORY_SUFFIX}"


def history_paths(path: str) -> tuple[str, ...]:
    """Where the memory of ``path`` (either layout) may be in a commit of any format: its
    path, then, for a plain id, where format 4 put it. For reading history only."""
    memory_id = id_from_path(path, past=True)
    old = format4_path(memory_id) if memory_id is not None else None
    return (path,) if memory_id is None or old is None else (memory_path(memory_id), old)


def is_memory_file(path: str) -> bool:
    """Whether a file at ``path`` is meant to be a memory: everything under ``memories/``,
    and ``*.md`` files under a document root (a README.txt beside them is left alone)."""
    root, sep, _rest = path.partition("/")
    if not sep:
        return False
    if root == MEMORIES_DIR:
        return True
    return root in DOCUMENT_ROOTS and path.endswith(MEMORY_SUFFIX)


def expected_path_form(path: str) -> str:
    """How a memory path should look, for the error about a file that is not at one."""
    if path.startswith(f"{MEMORIES_DIR}/"):
        return "memories/<ab>/<id>.md"
    return "<root>/<segment>/.../<name>.md with safe segment names"


def id_from_path(path: str, *, past: bool = False) -> str | None:
    """The id a memory file at ``path`` must carry, or None if the path is not a memory
    path. ``past``: also a plain id at format 4's path (:func:`format4_path`), for code
    that reads commits from before ``gitmem migrate``."""
    if type(path) is not str:
        return None
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
    if (
        len(parts) not in (3, 6)
        or parts[0] != MEMORIES_DIR
        or not parts[-1].endswith(MEMORY_SUFFIX)
    ):
        return None
    memory_id = parts[-1][: -len(MEMORY_SUFFIX)]
    try:
        check_id(memory_id)
    except InvalidIdError:
        return None
    if len(parts) == 3:
        return memory_id if shard(memory_id) == parts[1] else None
    return memory_id if past and format4_path(memory_id) == path else None


def id_prefix(prefix: str) -> str:
    """The id part of what a person typed for an id: ``mem_5f0c...`` (as help texts write
    it) is the prefix ``mem_5f0c``; checked like every id (:func:`check_id`)."""
    if isinstance(prefix, str):
        prefix = prefix.removesuffix("...").removesuffix("\u2026")
    return check_id(prefix)


FORK_MARK = ".fork-"
"""A fork's id is its memory's id, this, and a hash (:func:`gitmem.store.merge.fork_id`)."""


def forks_past(wanted: str, found: list[str]) -> list[str]:
    """The ids of ``found`` that are forks of an id ``wanted`` starts (their fork mark lies
    past what was typed, so it was not a fork that was asked for)."""
    return [i for i in found if FORK_MARK in i[max(len(wanted) - len(FORK_MARK) + 1, 0) :]]


def one_by_prefix(
    wanted: str, found: list[str], *, what: tuple[str, str] = ("id", "memories")
) -> str | None:
    """The one id of ``found`` (the ids starting with ``wanted``), None when there is none;
    an exact id, or a memory matched beside its own forks, wins. Several others raise
    :class:`AmbiguousIdError`."""
    if wanted in found:
        return wanted
    roots = [i for i in found if not any(i.startswith(r + FORK_MARK) for r in found)]
    if len(roots) == 1:
        return roots[0]
    if not found:
        return None
    found = sorted(found)
    more = f" and {len(found) - 10} more" if len(found) > 10 else ""
    shown = ", ".join(found[:10]) + more
    raise AmbiguousIdError(
        f"{what[0]} prefix {wanted} matches {len(found)} {what[1]}: {shown}",
        candidates=found,
        hint=f"give more characters of the {what[0]}",
    )
