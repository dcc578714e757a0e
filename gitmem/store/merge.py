"""Memory-aware merging of a memory file's two versions against their base (``gitmem sync``,
git's merge driver): front-matter field by field, the body three-way with both sides'
appended entries kept by date; where both changed the same lines, one side becomes a fork
``<id>.fork-<hash>``. A into B equals B into A (docs/collaboration.md)."""

from __future__ import annotations

import contextlib
import datetime as dt
import difflib
import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from gitmem.base.clock import parse_timestamp
from gitmem.base.errors import GitmemError
from gitmem.format import codec, memfile, schema
from gitmem.format.layout import FORK_MARK, MAX_ID_LENGTH, id_from_path, memory_path
from gitmem.format.model import DERIVED_KEYS
from gitmem.store.memory_versions import Versions

FORK_KEY = "merge_fork"
"""Front-matter key of a fork: the id of the memory it forked from."""
DECIDED_KEY = "merge_decided"
"""Front-matter key of a merged memory whose plain fields both sides changed differently:
field -> the value that lost to the later side. ``gitmem conflicts`` lists it, ``resolve``
settles it; until then both values are in the file, and nothing was dropped silently."""
# Fields that say who wrote last: their newer value is the answer, not a decision anyone
# needs to see.
_NOT_DECIDED = frozenset({"id", "created_at", "agent", "session_id", "trigger", DECIDED_KEY})


_ABSENT: Any = object()
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?")


@dataclass(frozen=True)
class Fork:
    """One side's version kept as a new memory because both sides changed the same lines."""

    id: str
    of: str
    path: str
    data: bytes

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "of": self.of, "path": self.path}


@dataclass(frozen=True)
class FileMerge:
    """The outcome of merging one path."""

    path: str
    data: bytes | None
    """What stays at the path (None: the file is gone)."""
    memory_id: str | None = None
    forks: tuple[Fork, ...] = ()
    kept_over_delete: bool = False
    """One side deleted the memory and the other changed it: the change was kept."""
    conflict: str | None = None
    """Why the file could not be merged (never set for a readable memory)."""
    decided: tuple[str, ...] = ()
    """Plain fields both sides changed differently, decided for the later side (see
    :data:`DECIDED_KEY`)."""


@dataclass(frozen=True)
class DerivedSides:
    """Each side's versions of the memory as of the side's commit, None where no commit can
    be named for it (the git driver in a rebase). Sides are ranked by them only when both
    are known; else the bytes decide, the same winner whichever side is ours."""

    ours: Versions | None = None
    theirs: Versions | None = None
    theirs_commit: str | None = field(default=None, compare=False)
    """The commit git is merging as theirs (the driver in a merge, not a rebase or a
    cherry-pick, which replay a copy): its merge landed once it is on the branch."""

    @property
    def known(self) -> bool:
        return self.ours is not None and self.theirs is not None


def _matches(base: Sequence[str], other: Sequence[str]) -> dict[int, int]:
    matcher = difflib.SequenceMatcher(None, base, other, autojunk=False)
    found: dict[int, int] = {}
    for block in matcher.get_matching_blocks():
        for n in range(block.size):
            found[block.a + n] = block.b + n
    return found


def _merge3(
    base: Sequence[str],
    first_keys: Sequence[str],
    second_keys: Sequence[str],
    first: Sequence[str],
    second: Sequence[str],
    inserted: Callable[[list[str], list[str]], list[str]] | None = None,
) -> list[str] | None:
    """diff3 over items compared by key, or None when both sides changed one region. A region
    changed by one side takes it, one changed alike takes ``first``'s, one only *inserted* by
    both takes ``inserted(first's, second's)`` when given; else a conflict (adjacent edits with
    no stable item between them too, as in git)."""
    to_first, to_second = _matches(base, first_keys), _matches(base, second_keys)
    out: list[str] = []
    i = j = k = 0
    while True:
        stable = i
        # Matching blocks are monotonic, so the next base item both sides kept is aligned.
        while stable < len(base) and not (stable in to_first and stable in to_second):
            stable += 1
        j_end = to_first[stable] if stable < len(base) else len(first)
        k_end = to_second[stable] if stable < len(base) else len(second)
        b, f_keys, s_keys = list(base[i:stable]), first_keys[j:j_end], second_keys[k:k_end]
        if f_keys == s_keys or s_keys == b:
            out.extend(first[j:j_end])
        elif f_keys == b:
            out.extend(second[k:k_end])
        elif not b and inserted is not None:
            out.extend(inserted(list(first[j:j_end]), list(second[k:k_end])))
        else:
            return None
        if stable >= len(base):
            return out
        out.append(first[to_first[stable]])
        i, j, k = stable + 1, to_first[stable] + 1, to_second[stable] + 1


def merge_lines(
    base: Sequence[str], ours: Sequence[str], theirs: Sequence[str]
) -> list[str] | None:
    """diff3 over lines (:func:`_merge3`): the merged lines, or None on a conflict."""
    return _merge3(base, list(ours), list(theirs), ours, theirs)


def merge_text(base: str, ours: str, theirs: str) -> str | None:
    """Three-way merge of text by lines; None on overlapping changes."""
    if ours == theirs:
        return ours
    if ours == base:
        return theirs
    if theirs == base:
        return ours
    merged = merge_lines(
        base.splitlines(keepends=True),
        ours.splitlines(keepends=True),
        theirs.splitlines(keepends=True),
    )
    return None if merged is None else "".join(merged)


def merge_appended(base: str, first: str, second: str, dates: tuple[str, str]) -> str | None:
    """Both sides only appended to ``base``: base + both sides' new sections in date order
    (``first``, the side with the later ``updated_at``, wins ties; a section both appended is
    kept once). None when either side did more than append whole lines."""
    if not (first.startswith(base) and second.startswith(base)):
        return None
    head = base
    add_first, add_second = first[len(base) :], second[len(base) :]
    if base and not base.endswith("\n"):
        # Store.append puts a newline between a body without one and the new text.
        if not (add_first.startswith("\n") and add_second.startswith("\n")):
            return None
        head, add_first, add_second = base + "\n", add_first[1:], add_second[1:]
    # Appended text as sections, each from a markdown heading on.
    left = _dated(_units(add_first, _HEADING), dates[0])
    right = _dated(_units(add_second, _HEADING), dates[1])
    seen = {text for _, text in left}
    right = [(d, text) for d, text in right if text not in seen]
    return _joined([head, *_by_date(left, right)])


_UNIT_START = re.compile(r"#|[-*+][ \t]|\d{1,9}[.)][ \t]")
_HEADING = re.compile("#")


def _units(text: str, start: re.Pattern[str] = _UNIT_START) -> list[str]:
    """Split a body into entries: a unit starts at a heading or a list item at column 0 (at a
    line ``start`` matches); other lines belong to the unit before them, and a unit of blank
    lines is joined by what follows."""
    parts: list[str] = []
    for line in text.splitlines(keepends=True):
        if parts and (not start.match(line) or not parts[-1].strip()):
            parts[-1] += line
        else:
            parts.append(line)
    return parts


def _unit_key(unit: str) -> str:
    # A body saved from the command line has no final newline, so the last entry of one
    # version is "x" where the next version, with an entry after it, has "x\n": one entry.
    return unit[:-1] if unit.endswith("\n") else unit


def _dated(units: Sequence[str], fallback: str) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    date = fallback
    for unit in units:
        found = _DATE_RE.search(unit.splitlines()[0] if unit else "")
        if found:
            date = found.group(0).replace(" ", "T")
        out.append((date, unit))
    return out


def _interleave(first: Sequence[str], second: Sequence[str], dates: tuple[str, str]) -> list[str]:
    """Entries both sides inserted at one place: each side's own order kept, merged by date."""
    seen = {_unit_key(unit) for unit in first}
    right = [(d, u) for d, u in _dated(second, dates[1]) if _unit_key(u) not in seen]
    return _by_date(_dated(first, dates[0]), right)


def _by_date(left: list[tuple[str, str]], right: list[tuple[str, str]]) -> list[str]:
    """Two sides' dated texts in one list: each side's order kept, the earlier date first,
    ``left`` (the side ranked higher) on ties."""
    merged: list[str] = []
    i = j = 0
    while i < len(left) or j < len(right):
        if j < len(right) and (i == len(left) or right[j][0] < left[i][0]):
            merged.append(right[j][1])
            j += 1
        else:
            merged.append(left[i][1])
            i += 1
    return merged


def merge_sections(base: str, first: str, second: str, dates: tuple[str, str]) -> str | None:
    """Three-way merge of entry-structured text (:func:`_units`): entries *inserted* by both sides
    at one place are all kept by date (:func:`_interleave`), so appends never fork. ``first``
    is the side ranked higher; None when both changed or removed the same entry."""
    first_units, second_units = _units(first), _units(second)
    merged = _merge3(
        [_unit_key(u) for u in _units(base)],
        [_unit_key(u) for u in first_units],
        [_unit_key(u) for u in second_units],
        first_units,
        second_units,
        lambda f, s: _interleave(f, s, dates),
    )
    return None if merged is None else _joined(merged)


def _joined(texts: Sequence[str]) -> str:
    """``texts`` one after another, each starting on a line of its own."""
    out = ""
    for text in texts:
        if out and not out.endswith("\n"):
            out += "\n"
        out += text
    return out


def _in(item: Any, items: Sequence[Any]) -> bool:
    return any(codec.same(item, other) for other in items)


def _merge_set(base: Any, first: Any, second: Any) -> list[Any]:
    """Three-way merge of a list as a set: additions from both sides, removals from either."""
    b = base if isinstance(base, list) else []
    f = first if isinstance(first, list) else []
    s = second if isinstance(second, list) else []
    out = [x for x in f if not (_in(x, b) and not _in(x, s))]
    out.extend(x for x in s if not _in(x, f) and not _in(x, b) and not _in(x, out))
    return out


def _same(a: Any, b: Any) -> bool:
    if a is _ABSENT or b is _ABSENT:
        return a is b
    return codec.same(a, b)


def merge_metadata(
    base: dict[str, Any] | None,
    first: dict[str, Any],
    second: dict[str, Any],
    decided: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Field-by-field merge, ``first`` the later side (its keys first): a plain field both changed
    differently takes ``first``'s, and ``decided`` gets ``second``'s losing value, but of two
    ``valid_until`` the earlier wins. Derived ``version`` and ``updated_at`` are left out."""
    base = base or {}
    out: dict[str, Any] = {}
    keys = list(first) + [k for k in second if k not in first]
    for key in keys:
        if key in DERIVED_KEYS:
            continue
        b, f, s = base.get(key, _ABSENT), first.get(key, _ABSENT), second.get(key, _ABSENT)
        if key in {"tags", "related"}:
            value: Any = _merge_set(b, f, s)  # an absent list is an empty one
            if value:
                out[key] = value
            continue
        if key == DECIDED_KEY:
            # Earlier undecided fields of either side stay listed until someone resolves them.
            value = {**(s if isinstance(s, dict) else {}), **(f if isinstance(f, dict) else {})}
            value = value or _ABSENT
        elif _same(f, s) or _same(s, b):
            value = f
        elif _same(f, b):
            value = s
        else:
            value, lost = f, s
            if key == "valid_until" and _earlier(s, f):
                value, lost = s, f
            if decided is not None and key not in _NOT_DECIDED:
                decided[key] = None if lost is _ABSENT else lost
        if value is not _ABSENT:
            out[key] = value
    return out


def _earlier(one: Any, other: Any) -> bool:
    """Whether timestamp ``one`` is before ``other`` (an absent or unreadable one is not)."""
    try:
        return one is not _ABSENT and (
            other is _ABSENT or parse_timestamp(one) < parse_timestamp(other)
        )
    except (TypeError, ValueError):
        return False


@dataclass(frozen=True)
class _Side:
    data: bytes
    doc: codec.Document
    updated_at: dt.datetime
    version: int
    """As a reader of the side's commit sees them, when both sides' are known; else the
    file's ``created_at`` and 1, equal for a memory's two sides."""

    @property
    def rank(self) -> tuple[dt.datetime, int, bytes]:
        # The later updated_at wins, then the higher version, then the bytes: a total
        # order on contents alone, so both merge directions pick the same winner.
        return (self.updated_at, self.version, self.data)


def _parse(data: bytes | None, path: str, versions: Versions | None = None) -> _Side | None:
    if data is None:
        return None
    try:
        memory = memfile.decode(data, path)
    except (GitmemError, ValueError, TypeError, KeyError):
        return None
    doc = memory.document
    if doc is None:  # decoded memories carry theirs: never None here
        return None
    memory = (versions or Versions()).apply(memory)  # unknown: version 1 at its creation
    return _Side(data, doc, memory.updated_at, memory.version)


def fork_id(memory_id: str, data: bytes) -> str:
    """The id of the fork that keeps ``data`` (one side's file) beside ``memory_id``.

    Derived from the content, so both merge directions name the fork alike.
    """
    suffix = FORK_MARK + hashlib.sha1(data).hexdigest()[:10]
    # Cut to stay within the id limit, never leaving "..", "./" or a dangling separator.
    head = memory_id[: MAX_ID_LENGTH - len(suffix)].rstrip("./-_")
    return head + suffix


def _serialize(doc: codec.Document, metadata: dict[str, Any], body: str, path: str) -> bytes:
    schema.validate(metadata, what=path)
    return codec.serialize(doc.with_changes(metadata, body)).encode("utf-8")


def _make_fork(loser: _Side, kept_meta: dict[str, Any], memory_id: str, path: str) -> Fork:
    new_id = fork_id(memory_id, loser.data)
    meta = {k: v for k, v in loser.doc.metadata.items() if k not in DERIVED_KEYS}
    meta["id"] = new_id
    if kept_meta.get("supersedes") is not None:
        meta["supersedes"] = kept_meta["supersedes"]
    else:
        meta.pop("supersedes", None)
    meta[FORK_KEY] = memory_id
    fork_path = memory_path(new_id)
    return Fork(new_id, memory_id, fork_path, _serialize(loser.doc, meta, loser.doc.body, path))


def merge_file(
    path: str,
    base: bytes | None,
    ours: bytes | None,
    theirs: bytes | None,
    *,
    derived: DerivedSides | None = None,
) -> FileMerge:
    """Merge one file of a store: a memory memory-aware (never conflict markers, never a side
    dropped), any other file as text. ``derived``: each side's versions where its commit is
    known (:class:`DerivedSides`)."""
    memory_id = id_from_path(path)
    if ours == theirs or base == theirs:
        return FileMerge(path, ours, memory_id)
    if base == ours:
        return FileMerge(path, theirs, memory_id)
    if ours is None or theirs is None:
        changed = theirs if ours is None else ours
        if memory_id is None:
            why = f"{path}: changed on one side, deleted on the other"
            return FileMerge(path, changed, conflict=why)
        return FileMerge(path, changed, memory_id, kept_over_delete=True)
    sides = derived if derived is not None and derived.known else DerivedSides()
    parsed_ours = _parse(ours, path, sides.ours) if memory_id is not None else None
    parsed_theirs = _parse(theirs, path, sides.theirs) if memory_id is not None else None
    if memory_id is None or parsed_ours is None or parsed_theirs is None:
        merged = _merge_raw(base, ours, theirs)
        if merged is not None:
            return FileMerge(path, merged, memory_id)
        if memory_id is None:
            return FileMerge(path, ours, conflict=f"{path}: both sides changed the same lines")
        why = "both sides changed it and one is not a readable memory"
        return FileMerge(path, max(ours, theirs), memory_id, conflict=f"{path}: {why}")
    first, second = sorted([parsed_ours, parsed_theirs], key=lambda s: s.rank, reverse=True)
    base_side = _parse(base, path)
    base_meta = base_side.doc.metadata if base_side is not None else None
    decided: dict[str, Any] = {}
    meta = merge_metadata(base_meta, first.doc.metadata, second.doc.metadata, decided)
    meta["id"] = memory_id
    base_body = base_side.doc.body if base_side is not None else None
    body = _merge_body(base_body, first, second)
    if body is not None:
        if decided:
            meta[DECIDED_KEY] = {**(meta.get(DECIDED_KEY) or {}), **decided}
        try:
            data = _serialize(first.doc, meta, body, path)
            return FileMerge(path, data, memory_id, decided=tuple(decided))
        except GitmemError:
            meta.pop(DECIDED_KEY, None)
            with contextlib.suppress(GitmemError):
                # A losing value the schema refuses under that key: kept in history only.
                return FileMerge(path, _serialize(first.doc, meta, body, path), memory_id)
    else:
        body = first.doc.body
    try:
        kept = _serialize(first.doc, meta, body, path)
    except GitmemError:
        kept = first.data
    try:
        fork = _make_fork(second, meta, memory_id, path)
    except GitmemError as exc:
        return FileMerge(path, kept, memory_id, conflict=f"{path}: cannot keep a fork: {exc}")
    return FileMerge(path, kept, memory_id, forks=(fork,))


def _merge_body(base: str | None, first: _Side, second: _Side) -> str | None:
    a, b = first.doc.body, second.doc.body
    if a == b:
        return a
    if base is None:
        return None  # both added different bodies under one id: keep both whole
    dates = (_date_text(first.updated_at), _date_text(second.updated_at))
    appended = merge_appended(base, a, b, dates)
    if appended is not None and a != base and b != base:
        return appended
    # Entries inserted anywhere (not only at the end) by both sides, as happens once one
    # merge has put a side's earlier-dated entry before the other's; then plain lines.
    sections = merge_sections(base, a, b, dates)
    return sections if sections is not None else merge_text(base, a, b)


def _date_text(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S")


def _merge_raw(base: bytes | None, ours: bytes, theirs: bytes) -> bytes | None:
    try:
        texts = [codec.decode(x) for x in (base or b"", ours, theirs)]
    except GitmemError:
        return None
    merged = merge_text(*texts)
    return merged.encode("utf-8") if merged is not None else None
