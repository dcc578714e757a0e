"""Where things live in a store: id <-> path, and the guards that keep ids safe.

Two kinds of id:

* plain ids (``mem_<uuid4>`` or any safe name) live at ``memories/a/b/c/d/<id>.md`` (format
  4: four levels of one hex digit, so no tree holds more than 16 folders and a store of a
  million memories rewrites ~3 KB of trees per create) or, in a store made or written
  before format 4, at the legacy ``memories/<ab>/<id>.md`` (256 shards: ~3,900 entries
  each at a million). Readers look at both (:func:`memory_paths`), in every format: a
  migrated store's history has the legacy paths, and a teammate's branch from before the
  migration still writes them;
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

import functools
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
_MEM_HEX4_RE = re.compile(r"mem_([0-9a-f]{4})")

FANOUT_FORMAT = 4
"""The first store format that puts a *new* plain-id memory at the 16-way path
(:func:`fanout_path`); older formats put it at the legacy one (:func:`legacy_path`)."""


def new_id() -> str:
    return f"mem_{uuid.uuid4()}"


def is_path_id(memory_id: str) -> bool:
    """True for a path id (``projects/acme/known_issues``), False for a plain one."""
    return "/" in memory_id


_PLAIN_ID_RE = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{MAX_ID_LENGTH - 1}}}")
"""A plain id every check below passes, but for ``..`` and a ``.md`` ending: ASCII
letters, digits and ``._-`` only (so no control, invisible or separator character), at
most :data:`MAX_ID_LENGTH` long. Every write checks its id several times (path, locate,
the file's id): this answers the usual ``mem_<uuid>`` without a look at each character's
Unicode category."""


def check_id(value: object, *, what: str = "id") -> str:
    """Return the id unchanged if it is safe to turn into a file name, else raise InvalidIdError."""
    if (
        isinstance(value, str)
        and _PLAIN_ID_RE.fullmatch(value)
        and ".." not in value
        and not value.lower().endswith(MEMORY_SUFFIX)
    ):
        return value
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
    """The two-character shard directory of the legacy layout (formats 1-3).

    ``mem_<uuid>`` ids shard by their first two hex digits so a person can find
    the file by eye; any other id shards by a hash of the id.
    """
    match = _MEM_HEX_RE.match(memory_id)
    if match:
        return match.group(1)
    return hashlib.sha1(memory_id.encode("utf-8")).hexdigest()[:2]


def fanout(memory_id: str) -> str:
    """The four one-digit folders of format 4's layout, ``a/b/c/d``: the uuid's first four
    hex digits for ``mem_<uuid>`` ids (found by eye, like :func:`shard`), else the first
    four of the id's SHA-1."""
    match = _MEM_HEX4_RE.match(memory_id)
    digits = match.group(1) if match else hashlib.sha1(memory_id.encode("utf-8")).hexdigest()[:4]
    return "/".join(digits)


def legacy_path(memory_id: str) -> str:
    """Where formats 1-3 put a plain id: ``memories/<ab>/<id>.md``."""
    check_id(memory_id)
    return f"{MEMORIES_DIR}/{shard(memory_id)}/{memory_id}{MEMORY_SUFFIX}"


def fanout_path(memory_id: str) -> str:
    """Where format 4 puts a plain id: ``memories/a/b/c/d/<id>.md``."""
    check_id(memory_id)
    return f"{MEMORIES_DIR}/{fanout(memory_id)}/{memory_id}{MEMORY_SUFFIX}"


def memory_path(memory_id: str, format: int = FANOUT_FORMAT) -> str:
    """Where a *new* memory ``memory_id`` goes in a store of ``format``. A path id is its
    own path in every format. To find an existing memory, look at :func:`memory_paths`
    (a write of an existing memory updates it where it is)."""
    check_id(memory_id)
    if is_path_id(memory_id):
        return f"{memory_id}{MEMORY_SUFFIX}"
    return fanout_path(memory_id) if format >= FANOUT_FORMAT else legacy_path(memory_id)


def path_like(memory_id: str, like: str) -> str:
    """The path of ``memory_id`` in the layout the memory path ``like`` is in (a fork made
    by a merge goes beside the memory it forks from)."""
    legacy = like.startswith(f"{MEMORIES_DIR}/") and like.count("/") == 2
    return memory_path(memory_id, FANOUT_FORMAT - 1 if legacy else FANOUT_FORMAT)


def memory_paths(memory_id: str) -> tuple[str, ...]:
    """Every path a memory ``memory_id`` may be at, in the order a reader looks: the
    format 4 path, then the legacy one (one path for a path id). Both are looked at in
    every format, so history from before a migration and a branch made before it read."""
    if type(memory_id) is str:
        return _memory_paths_recent(memory_id)
    return _memory_paths(memory_id)


# The last answers are kept (1024: two of an index build's batches of files): a build asks
# for the same id's paths several times in a row (the version rows' diff, the parent's file
# at either path), and id_from_path of each path when it reads the blob and again when it
# decodes it. Only str is cached (anything else raises as it did).
@functools.lru_cache(maxsize=1024)
def _memory_paths_recent(memory_id: str) -> tuple[str, ...]:
    return _memory_paths(memory_id)


def _memory_paths(memory_id: str) -> tuple[str, ...]:
    check_id(memory_id)
    if is_path_id(memory_id):
        return (f"{memory_id}{MEMORY_SUFFIX}",)
    return (fanout_path(memory_id), legacy_path(memory_id))


def path_twins(path: str) -> tuple[str, ...]:
    """The paths of the memory at ``path``: :func:`memory_paths` of its id (format 4's
    first, whichever ``path`` is), or just ``(path,)`` for a path id or a path that is not
    a memory path."""
    memory_id = id_from_path(path)
    if memory_id is None or is_path_id(memory_id):
        return (path,)
    return memory_paths(memory_id)


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
        return "memories/a/b/c/d/<id>.md or memories/<ab>/<id>.md"
    return "<root>/<segment>/.../<name>.md with safe segment names"


def id_from_path(path: str) -> str | None:
    """The id a memory file at ``path`` must carry, or None if the path is not a memory path."""
    if type(path) is str:
        return _id_from_path_recent(path)
    return _id_from_path(path)


@functools.lru_cache(maxsize=1024)
def _id_from_path_recent(path: str) -> str | None:
    return _id_from_path(path)


def _id_from_path(path: str) -> str | None:
    root = path.partition("/")[0]
    if root in DOCUMENT_ROOTS:
        if not path.endswith(MEMORY_SUFFIX):
            return None
        candidate = path[: -len(MEMORY_SUFFIX)]
        try:
            return check_id(candidate)
        except InvalidIdError:
            return None
    # Both layouts: memories/<ab>/<id>.md (formats 1-3) and memories/a/b/c/d/<id>.md
    # (format 4); each only where the id's own shard puts it.
    parts = path.split("/")
    if len(parts) not in (3, 6) or parts[0] != MEMORIES_DIR:
        return None
    name = parts[-1]
    if not name.endswith(MEMORY_SUFFIX):
        return None
    memory_id = name[: -len(MEMORY_SUFFIX)]
    try:
        check_id(memory_id)
    except InvalidIdError:
        return None
    if len(parts) == 3:
        return memory_id if shard(memory_id) == parts[1] else None
    return memory_id if fanout(memory_id) == "/".join(parts[1:5]) else None


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
