"""Credentials in memories, files and commit messages, under a store's policy: a committed
``gitmem.yaml`` can only add patterns; ``allow`` and ``disable`` are the user's own
(docs/security.md). :func:`scan_text` finds, the ``refuse*`` functions raise.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

from gitmem.base import redact as redact_mod
from gitmem.base.errors import InvalidInputError, InvalidMemoryError
from gitmem.base.redact import (
    ALLOW_MARKER,
    DEFAULT_PATTERNS,
    SecretPattern,
)
from gitmem.base.redact import redact as redact  # scanning and redacting: one module to ask
from gitmem.format import codec

if TYPE_CHECKING:
    from gitmem.format.saferegex import SafePattern

EXCERPT_WIDTH = 80
"""Characters of context an excerpt shows around a masked secret, at most."""


@dataclass(frozen=True)
class SecretFinding:
    """A credential found in a text. ``excerpt`` is the line with the secret masked."""

    kind: str
    line: int
    excerpt: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class SecretPolicy:
    """The patterns to look for and the allow-list, as a store's ``gitmem.yaml`` sets them."""

    patterns: tuple[SecretPattern, ...]
    allow: tuple[re.Pattern[str] | SafePattern, ...] = ()

    def scan(self, text: str) -> list[SecretFinding]:
        return scan_text(text, self.patterns, allow=self.allow)


class SecretsFoundError(InvalidInputError):
    """Content holds what looks like a credential, and the caller did not allow it."""

    default_hint = (
        "remove the credential (write where it is kept instead); if it is not a real one, "
        f"put {ALLOW_MARKER} on its line or list it under secrets.allow for this store in your "
        "own gitmem configuration (stores: {<git dir>: {secrets: {allow: [...]}}}; command "
        "line: gitmem --allow-secrets ...; API: Store.secrets_allowed())"
    )

    def __init__(self, what: str, findings: Sequence[SecretFinding]) -> None:
        self.findings = list(findings)
        first = self.findings[0]
        more = f" (and {len(self.findings) - 1} more)" if len(self.findings) > 1 else ""
        # Only the kind and line: never the secret, not even masked, in an error message
        # that may end up in logs.
        super().__init__(
            f"{what} looks like it holds a secret: {first.kind} on line {first.line}{more}"
        )


def _mask(secret: str, keep: int) -> str:
    # ``keep`` covers a public prefix; a pattern whose whole match is public (a PEM header)
    # keeps it all. Otherwise never more than half, so a short secret is never shown.
    shown = secret if keep >= len(secret) else secret[: min(keep, len(secret) // 2)]
    return shown + "*" * 8


def scan_text(
    text: str,
    patterns: Iterable[SecretPattern] | None = None,
    *,
    allow: Iterable[re.Pattern[str] | SafePattern | str] = (),
) -> list[SecretFinding]:
    """Every credential in ``text`` (lines holding :data:`ALLOW_MARKER` skipped), in order:
    kind, 1-based line, masked excerpt; ``allow`` drops secrets it matches."""
    chosen = DEFAULT_PATTERNS if patterns is None else tuple(patterns)
    allowed = [_compile(a, "allow") if isinstance(a, str) else a for a in allow]
    hits = redact_mod.find(text, chosen, allowed)
    findings: list[SecretFinding] = []
    for start, _end, pattern in hits:
        line_start, line_end = redact_mod.line_at(text, start)
        line = text[line_start:line_end]
        if ALLOW_MARKER in line:
            continue
        # Mask every secret on this line, not only this one: the excerpt must leak none.
        pieces: list[str] = []
        pos = focus = 0
        for other_start, other_end, other in hits:
            if not line_start <= other_start < line_end:
                continue
            pieces.append(line[pos : other_start - line_start])
            if other_start == start:
                focus = sum(map(len, pieces))
            pos = min(other_end - line_start, len(line))
            pieces.append(_mask(line[other_start - line_start : pos], other.keep))
        pieces.append(line[pos:])
        excerpt = _clip("".join(pieces), focus)
        findings.append(SecretFinding(pattern.kind, text.count("\n", 0, start) + 1, excerpt))
    return findings


def _clip(masked: str, focus: int) -> str:
    """The masked line, printable, cut to :data:`EXCERPT_WIDTH` around ``focus``."""
    masked = "".join(c if c.isprintable() else "?" for c in masked).strip()
    if len(masked) <= EXCERPT_WIDTH:
        return masked
    begin = max(0, min(focus - EXCERPT_WIDTH // 3, len(masked) - EXCERPT_WIDTH))
    cut = masked[begin : begin + EXCERPT_WIDTH]
    return ("..." if begin else "") + cut + ("..." if begin + EXCERPT_WIDTH < len(masked) else "")


def scan_bytes(data: bytes, policy: SecretPolicy | None = None) -> list[SecretFinding]:
    """:func:`scan_text` over file content (undecodable bytes are replaced, not fatal)."""
    return (policy or DEFAULT_POLICY).scan(data.decode("utf-8", "replace"))


def refuse_values(data: bytes, policy: SecretPolicy | None = None) -> None:
    """Raise :class:`SecretsFoundError` if a front-matter value holds a credential its text
    does not spell (only an escape, ``\\x70``, or a tag can hide one)."""
    end = data.find(b"\n---", 3)
    head = data if end < 0 else data[:end]
    if not data.startswith(b"---") or not (b"\\" in head or b"!" in head):
        return
    try:
        doc = codec.parse(data.decode("utf-8", "replace"))
    except (InvalidInputError, ValueError, RecursionError):
        return  # not readable as a memory: its reader says why
    refuse_memory(memory_id=None, metadata=doc.metadata, body="", policy=policy)


def scan_memory_bytes(data: bytes, policy: SecretPolicy | None = None) -> list[SecretFinding]:
    """:func:`scan_bytes`, and when that finds nothing, what :func:`refuse_values` refuses,
    reported at the file's line 1 (the front-matter)."""
    findings = scan_bytes(data, policy)
    if not findings:
        try:
            refuse_values(data, policy)
        except SecretsFoundError as exc:
            findings = [
                SecretFinding(f.kind, 1, "(in a front-matter value: " + f.excerpt + ")")
                for f in exc.findings
            ]
    return findings


def policy_from_config(raw: Mapping[str, Any] | None) -> SecretPolicy:
    """A store's policy from gitmem.yaml's ``secrets`` (only its ``patterns`` count) and
    the user's own settings; a malformed section raises InvalidMemoryError naming the key
    (its shape: schemas/config.schema.json)."""
    from gitmem.format import config, schema

    committed = (raw or {}).get("secrets")
    local = config.local_part(raw).get("secrets")
    where = config.local_where(raw)
    for section, what in ((committed, "gitmem.yaml"), (local, f"{where}:")):
        if section is not None:
            schema.validate({"secrets": section}, schema=config.CONFIG_SCHEMA, what=what)
    committed, local = committed or {}, local or {}
    if committed.get("allow"):
        config.loosened(raw, "secrets.allow", "allows what looks like a credential")
    if committed.get("disable"):
        named = ", ".join(committed["disable"])
        config.loosened(raw, "secrets.disable", f"switches off the check for {named}")
    if not committed and not local:
        return DEFAULT_POLICY
    where += ": secrets"
    disable = local.get("disable", [])
    known = {p.kind for p in DEFAULT_PATTERNS}
    bad = [kind for kind in disable if kind not in known]
    if bad:
        raise InvalidMemoryError(
            f"{where}.disable names unknown kind(s) {', '.join(bad)} "
            f"(built-in kinds: {', '.join(sorted(known))})"
        )
    patterns = [p for p in DEFAULT_PATTERNS if p.kind not in disable]
    for section, prefix in ((committed, "gitmem.yaml secrets"), (local, where)):
        for n, entry in enumerate(section.get("patterns", [])):
            patterns.append(_custom(entry, f"{prefix}.patterns[{n}]"))
    allow = tuple(
        _compile(text, f"{where}.allow[{n}]") for n, text in enumerate(local.get("allow", []))
    )
    return SecretPolicy(tuple(patterns), allow)


def _compile(text: str, where: str) -> SafePattern:
    # Committed patterns run under a time bound: a teammate's must not hang every write.
    from gitmem.format import saferegex

    try:
        return saferegex.compile(text, what=where)
    except saferegex.PatternError as exc:
        raise InvalidMemoryError(
            f"{where} is not a valid regular expression: {exc.reason}"
        ) from None


def _custom(entry: Mapping[str, Any], where: str) -> SecretPattern:
    """One of a section's ``patterns`` (its shape checked), compiled; its group must exist."""
    compiled = _compile(entry["regex"], f"{where}.regex")
    group, regex = entry.get("group", 0), compiled.compiled
    if group not in (regex.groupindex if isinstance(group, str) else range(regex.groups + 1)):
        raise InvalidMemoryError(f"{where}.group {group!r} is not a group of its regex")
    entropy = entry.get("min_entropy")
    return SecretPattern(
        entry["kind"],
        compiled,
        group=group if isinstance(group, str) else int(group),
        keep=int(entry.get("keep", 0)),
        min_entropy=None if entropy is None else float(entropy),
    )


DEFAULT_POLICY = SecretPolicy(DEFAULT_PATTERNS)
"""The built-in patterns with nothing allowed: what a store without a ``secrets`` section uses."""


def refuse(text: str, what: str, policy: SecretPolicy | None = None) -> None:
    """Raise :class:`SecretsFoundError` if ``text`` holds a credential under ``policy``."""
    findings = (policy or DEFAULT_POLICY).scan(text)
    if findings:
        raise SecretsFoundError(what, findings)


def _field_texts(value: Any, where: str) -> Iterator[tuple[str, str, bool]]:
    """Every text in a front-matter value, depth first: (where, text, is_key); a key
    before its value, so no path that spells a secret key out is built first."""
    if isinstance(value, str):
        yield where, value, False
    elif isinstance(value, Mapping):
        for key, item in value.items():
            yield where, str(key), True
            yield from _field_texts(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, (list, tuple)):
        for n, item in enumerate(value):
            yield from _field_texts(item, f"{where}[{n}]")
    elif value is not None and not isinstance(value, (bool, int, float)):
        yield where, str(value), False


def refuse_memory(
    *,
    memory_id: str | None,
    metadata: Mapping[str, Any],
    body: str,
    policy: SecretPolicy | None = None,
    path: str | None = None,
) -> None:
    """Raise :class:`SecretsFoundError` if a memory's id, a front-matter field (as a value:
    escapes hide nothing) or its body holds a credential, naming where, never the value.
    Runs before any other check, so no schema error can echo a token first."""
    policy = policy or DEFAULT_POLICY
    if memory_id is not None:
        refuse(memory_id, "the id", policy)
    # ``path`` is named only once the id it is made of is known to be clean.
    named = path if path and not policy.scan(path) else None

    def place(what: str) -> str:
        return f"{named} ({what})" if named else what

    # One scan of all of them first (each scan has a fixed cost); only when it finds
    # something is each field scanned to say which.
    fields = list(_field_texts(dict(metadata), ""))
    found = bool(policy.scan("\n\n".join(text for _, text, _ in fields)))
    for where, text, is_key in fields if found else ():
        under = f" under {where}" if where else ""
        what = f"a front-matter key{under}" if is_key else f"front-matter field {where}"
        refuse(text, place(what), policy)
    refuse(body, place("body"), policy)


def refuse_commit_message(
    subject: str,
    body: str | None,
    trailers: Iterable[tuple[str, str]],
    policy: SecretPolicy | None = None,
) -> None:
    """Raise :class:`SecretsFoundError` if a commit message (subject, body, trailers) holds
    a credential."""
    text = "\n".join([subject, body or "", *(f"{key}: {value}" for key, value in trailers)])
    refuse(text, "the commit message", policy)
