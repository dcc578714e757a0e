"""Where things live in a store: id <-> path, and the guards that keep ids safe.

Every id that reaches a path goes through :func:`check_id` first, so no id can
name a file outside its directory (``..``, ``/``, ``\\``, percent-escapes,
control characters, absolute paths are all refused before any path is built).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
import uuid

from .errors import InvalidIdError

MEMORIES_DIR = "memories"
CONFIG_FILE = "gitmem.yaml"
ATTRIBUTES_FILE = ".gitattributes"
MEMORY_SUFFIX = ".md"
MAX_ID_LENGTH = 200

_ID_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")
_MEM_HEX_RE = re.compile(r"mem_([0-9a-f]{2})")


def new_id() -> str:
    return f"mem_{uuid.uuid4()}"


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
    if "/" in value or "\\" in value:
        raise InvalidIdError(f"{what} {shown} contains a path separator")
    if ".." in value:
        raise InvalidIdError(f"{what} {shown} contains '..'")
    if "%" in value:
        raise InvalidIdError(f"{what} {shown} contains '%' (percent-escapes are not decoded)")
    if not _ID_RE.fullmatch(value):
        raise InvalidIdError(
            f"{what} {shown} is not allowed: use letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    if value.lower().endswith(MEMORY_SUFFIX):
        raise InvalidIdError(f"{what} {shown} must not end in {MEMORY_SUFFIX!r}")
    return value


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
    return f"{MEMORIES_DIR}/{shard(memory_id)}/{memory_id}{MEMORY_SUFFIX}"


def id_from_path(path: str) -> str | None:
    """The id a memory file at ``path`` must carry, or None if the path is not a memory path."""
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
