"""The store's input checks: each raises a GitmemError naming what was wrong before anything
is staged, so a refused write changes nothing."""

from __future__ import annotations

import builtins
import datetime as dt
import re
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

from gitmem.base.clock import parse_timestamp
from gitmem.base.errors import ConflictError, InvalidInputError
from gitmem.format import codec
from gitmem.format.layout import check_id
from gitmem.format.model import EDITABLE_FIELDS, Memory, Related, Relationship, Status, Trigger

_TRAILER_KEY = re.compile(r"[A-Za-z][A-Za-z0-9-]*")

RelatedInput = Related | Mapping[str, str] | tuple[str, str] | str
"""One related memory as a caller may pass it: Related, mapping, (id, relationship) or id."""


def check_trailer(key: str, value: str) -> None:
    """A trailer is one line ``Key: value``; anything else would corrupt the commit's trailers."""
    if not _TRAILER_KEY.fullmatch(key):
        raise InvalidInputError(f"trailer key {key!r} must be letters, digits and '-'")
    if not value or "\n" in value or "\r" in value:
        raise InvalidInputError(f"trailer {key} must be one non-empty line")


_SIGNATURE_CRUD = " .,:;<>\"\\'"
"""Characters git (libgit2) trims from the ends of an author name; '<' and '>' may not occur."""


def author_name(agent: str) -> str:
    """The agent as a git author name: any agent text is accepted (the Gitmem-Agent trailer
    keeps it exactly), but git refuses angle brackets and names that are only punctuation."""
    name = agent.replace("<", "").replace(">", "").strip(_SIGNATURE_CRUD)
    return name or "agent"


def check_expected(current: Memory, expected: int | None) -> None:
    if expected is not None and current.version != expected:
        raise ConflictError(
            f"{current.id} is at version {current.version}, not {expected}: "
            "someone else changed it",
            hint="read it again and retry with the new version",
        )


def whole_number(what: str, value: Any, minimum: int) -> None:
    if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
        raise InvalidInputError(f"{what} must be a whole number >= {minimum}, not {value!r}")


_CONTROL = re.compile("[\x00-\x1f\x7f]")
"""The characters a one-line field refuses: C0 controls (line breaks among them) and DEL.
One regex search, not a Python test per character (a create checks six such fields)."""


def single_line(what: str, value: Any) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInputError(f"{what} must be text, not {type(value).__name__}")
    if _CONTROL.search(value):
        raise InvalidInputError(f"{what} must be one line without control characters")
    value = value.strip()
    return value or None


def tag_tuple(value: Iterable[str] | str | None) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    out: builtins.list[str] = []
    for tag in value:
        clean = single_line("tag", tag)
        if clean and clean not in out:
            out.append(clean)
    return tuple(out)


def related_tuple(value: Iterable[RelatedInput] | None) -> tuple[Related, ...]:
    if value is None:
        return ()
    out: builtins.list[Related] = []
    for item in value:
        if isinstance(item, Related):
            rid, rel = item.id, str(item.relationship)
        elif isinstance(item, str):
            rid, _, rel = item.partition(":")
            rel = rel or str(Relationship.RELATES_TO)
        elif isinstance(item, tuple):
            rid, rel = item
        elif isinstance(item, Mapping):
            rid, rel = item.get("id", ""), item.get("relationship", str(Relationship.RELATES_TO))
        else:
            raise InvalidInputError(
                f"related entry {item!r} is not an id, (id, relationship) or mapping"
            )
        check_id(rid, what="related id")
        out.append(
            Related(rid, enum_value(Relationship, "relationship", rel) or Relationship.RELATES_TO)
        )
    return tuple(out)


def enum_value(kind: Any, what: str, value: Any) -> Any:
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        allowed = ", ".join(str(m) for m in kind)
        raise InvalidInputError(f"{what} {value!r} is not one of {allowed}") from None


def extra_fields(value: Mapping[str, Any] | None) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InvalidInputError("extra must be a mapping of front-matter keys to values")
    from gitmem.format.model import DERIVED_KEYS, KNOWN_KEYS

    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"extra key {key!r} must be a non-empty string")
        if key in KNOWN_KEYS or key in DERIVED_KEYS:
            raise InvalidInputError(f"extra key {key!r} is a known field; pass it as {key}=")
        # Before anything compares it recursively; what YAML cannot write, encoding refuses.
        codec.check_writable_depth({key: item})
        out[key] = item
    return out


def memory_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in fields.items() if k != "extra" and v is not None}
    if fields.get("extra"):
        out["extra"] = {k: v for k, v in fields["extra"].items() if v is not None}
    return out


def apply_fields(current: Memory, changes: Mapping[str, Any], body: str | None) -> Memory:
    updates = dict(changes)
    if "extra" in changes:  # merged into the unknown keys; a None value removes its key
        extra = changes["extra"]
        merged = {**current.extra, **extra}
        updates["extra"] = {k: v for k, v in merged.items() if not (k in extra and v is None)}
    if body is not None:
        updates["body"] = body
    return replace(current, **updates)


def body_text(body: str | bytes, *, what: str = "body", allow_empty: bool = False) -> str:
    """A memory's body (or text to add to one) as given: text (bytes are decoded as UTF-8),
    without NUL bytes, and not empty or only whitespace unless ``allow_empty``. The one
    check of the library and the command line alike."""
    if isinstance(body, bytes):
        body = codec.decode(body, what=what)
    if not isinstance(body, str):
        raise InvalidInputError(f"{what} must be text, not {type(body).__name__}")
    if "\x00" in body:
        raise InvalidInputError(f"{what} contains a NUL byte; memories are text")
    if not allow_empty and not body.strip():
        raise InvalidInputError(
            f"the {what} is empty",
            hint="to store it anyway: --allow-empty (allow_empty=True in Python)",
        )
    return body


def settable_fields(fields: Mapping[str, Any]) -> dict[str, Any]:
    """Check and normalise caller-settable fields; raises naming the bad one."""
    unknown = set(fields) - EDITABLE_FIELDS - {"extra"}
    if unknown:
        raise InvalidInputError(
            f"cannot set {', '.join(sorted(unknown))}: settable fields are "
            f"{', '.join(sorted(EDITABLE_FIELDS))} and extra"
        )
    out: dict[str, Any] = {}
    for key, value in fields.items():
        if key in {"title", "category", "agent", "session_id"}:
            out[key] = single_line(key, value)
        elif key == "tags":
            out[key] = tag_tuple(value)
        elif key == "related":
            out[key] = related_tuple(value)
        elif key == "trigger":
            out[key] = enum_value(Trigger, key, value)
        elif key == "status":
            out[key] = enum_value(Status, key, value) or Status.ACTIVE
            if out[key] is Status.SUPERSEDED:
                raise InvalidInputError(
                    "status superseded is what a supersede gives the memory it replaces"
                )
        elif key == "extra":
            out[key] = extra_fields(value)
        elif key in {"valid_from", "valid_until"}:
            out[key] = valid_time(value, key)
    return out


def valid_time(value: Any, what: str = "valid time") -> dt.datetime | None:
    """A valid-time bound as given (RFC 3339 date or date-time text, a date, a datetime;
    a naive one is UTC) -> an aware UTC datetime; None stays None (no bound)."""
    if value is None:
        return None
    try:
        return parse_timestamp(value)
    except (TypeError, ValueError, AttributeError):
        raise InvalidInputError(
            f"{what} {value!r} is not an RFC 3339 date or date-time (2026-03-01, "
            "2026-03-01T09:00:00Z)"
        ) from None
