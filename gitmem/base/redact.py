"""Credentials in text, as the built-in patterns find them, and text with them redacted:
in the base layer so every error message is redacted (:mod:`gitmem.format.secrets` builds
a store's scanning on it).
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Protocol


class Matcher(Protocol):
    """What a pattern needs of a compiled regex: ``re.Pattern`` or a time-bounded one."""

    def finditer(self, string: str) -> Iterator[re.Match[str]]: ...

    def search(self, string: str) -> re.Match[str] | None: ...


ALLOW_MARKER = "gitmem:allow-secret"
"""A line containing this is never reported."""


@dataclass(frozen=True)
class SecretPattern:
    """One kind of credential: a regular expression and how to judge and mask its matches."""

    kind: str
    regex: Matcher
    """``re`` for built-in patterns; a store's own run under saferegex's time bound."""
    group: int | str = 0
    """The regex group that is the secret itself (masked in excerpts, checked for entropy)."""
    keep: int = 0
    """Leading characters of the secret shown unmasked: a fixed public prefix such as ``ghp_``."""
    min_entropy: float | None = None
    """Shannon entropy (bits per character) the secret must reach: tells keys from prose."""
    needs_digit_and_letter: bool = False
    name_group: int | None = None
    """The regex group holding the assigned name: ``private_key_id`` and the like are not."""
    hints: tuple[str, ...] = ()
    """Lowercase substrings one of which every match contains (empty: always run the regex)."""


class LazyPattern:
    """A built-in regex compiled when a text first needs it (most never run in a process)."""

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern

    @functools.cached_property
    def compiled(self) -> re.Pattern[str]:
        return re.compile(self.pattern)

    def finditer(self, string: str) -> Iterator[re.Match[str]]:
        return self.compiled.finditer(string)

    def search(self, string: str) -> re.Match[str] | None:
        return self.compiled.search(string)


_SECRET_NAMES = (
    r"password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|client[_-]?secret|auth[_-]?token|credentials?|bearer|session[_-]?key"
    r"|signing[_-]?key|encryption[_-]?key"
)


def _pattern(kind: str, regex: str, **options: Any) -> SecretPattern:
    return SecretPattern(kind, LazyPattern(regex), **options)


def _token(
    kind: str, prefixes: str | tuple[str, ...], body: str, end: str = "", **options: Any
) -> SecretPattern:
    """A credential known by its prefix (its hint, left unmasked): one of ``prefixes``, then
    ``body``, followed by none of the characters ``end``. Bounded on the left by a letter or
    digit only, so ``mem_ghp_...`` and ``svc-hf_...`` are found."""
    prefixes = (prefixes,) if isinstance(prefixes, str) else prefixes
    regex = rf"(?<![A-Za-z0-9])((?:{'|'.join(map(re.escape, prefixes))}){body})"
    options.setdefault("keep", len(prefixes[0]))
    options.setdefault("hints", tuple(p.lower() for p in prefixes))
    return _pattern(kind, regex + (f"(?![{end}])" if end else ""), group=1, **options)


_NAME_HINTS = ("passw", "passphrase", "pwd", "secret", "token", "key", "credential", "bearer")
_KEY = "A-Za-z0-9_-"
_ALNUM = "A-Za-z0-9"


# Order matters: where two patterns cover the same characters, the earlier one is reported
# (a GCP key's embedded PEM header is one gcp-service-account-key, not also a private-key).
DEFAULT_PATTERNS: tuple[SecretPattern, ...] = (
    _pattern(
        "gcp-service-account-key",
        r'"private_key"\s*:\s*"(-----BEGIN [A-Z ]*PRIVATE KEY-----[^"]*)',
        group=1,
        keep=11,
        hints=("private_key",),
    ),
    _pattern(
        "private-key",
        r"-----BEGIN ((?:RSA|DSA|EC|OPENSSH|ENCRYPTED|PGP|SSH2) )?PRIVATE KEY( BLOCK)?-----",
        keep=64,
        hints=("private key",),
    ),
    _pattern(
        "aws-access-key-id",
        r"(?<![A-Z0-9])((?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA|ANPA)[A-Z0-9]{16})(?![A-Z0-9])",
        group=1,
        keep=4,
        hints=("akia", "asia", "abia", "acca", "aida", "aroa", "anpa"),
    ),
    _pattern(
        "aws-secret-access-key",
        r"(?i)(?:aws)?_?secret_?(?:access)?_?key[\"']?\s*[:=]\s*[\"']?"
        r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        group=1,
        min_entropy=3.5,
        hints=("secret",),
    ),
    _token("google-api-key", "AIza", f"[{_KEY}]{{35}}", _KEY),
    _token("github-token", ("ghp_", "gho_", "ghs_", "ghu_", "ghr_"), "[A-Za-z0-9]{36,255}", _ALNUM),
    _token("github-fine-grained-token", "github_pat_", "[A-Za-z0-9_]{22,255}", "A-Za-z0-9_"),
    _token(
        "gitlab-token", ("glpat-", "gldt-", "glptt-", "glrt-", "gloas-"), f"[{_KEY}]{{20,}}+", _KEY
    ),
    _token("slack-token", "xox", "[abposre]-[A-Za-z0-9-]{10,}+", "A-Za-z0-9-", keep=5),
    _pattern(
        "slack-webhook",
        r"https://hooks\.slack\.com/(?:services|workflows)/(T[A-Za-z0-9_/]{8,})",
        group=1,
        keep=1,
        hints=("hooks.slack.com",),
    ),
    _token("anthropic-api-key", "sk-ant-", rf"[a-z]+\d*-[{_KEY}]{{32,}}", _KEY),
    _token(
        "openai-api-key",
        "sk-",
        rf"(?:proj-|svcacct-|admin-)?[{_KEY}]{{16,}}T3BlbkFJ[{_KEY}]{{16,}}",
        hints=("t3blbkfj",),
    ),
    # Project, service-account and admin keys issued since 2024 need not carry the T3BlbkFJ
    # marker; their prefix and length alone tell them from prose.
    _token("openai-api-key", ("sk-proj-", "sk-svcacct-", "sk-admin-"), f"[{_KEY}]{{40,}}", _KEY),
    _token("huggingface-token", "hf_", "[A-Za-z0-9]{30,}", _ALNUM),
    _token("npm-token", "npm_", "[A-Za-z0-9]{36}", _ALNUM),
    _token("pypi-token", "pypi-AgEIcHlwaS5vcmc", f"[{_KEY}]{{50,}}", keep=5),
    _token("sendgrid-api-key", "SG.", rf"[{_KEY}]{{22}}\.[{_KEY}]{{43}}", _KEY),
    _token("stripe-key", ("sk_live_", "rk_live_"), "[A-Za-z0-9]{20,}", _ALNUM),
    _token("jwt", "eyJ", rf"[{_KEY}]{{8,}}+\.eyJ[{_KEY}]{{8,}}+\.[{_KEY}]{{16,}}+"),
    _pattern(
        "url-credentials",
        r"://[^\s:/@]{1,256}:([^\s:/@]{3,256})@[^\s/@]+",
        group=1,
        min_entropy=1.0,
        hints=("://",),
    ),
    _pattern(
        "authorization-header",
        r"(?i)\bauthorization\s*:\s*(?:bearer|basic|token)\s+([A-Za-z0-9._~+/=-]{16,})",
        group=1,
        min_entropy=3.0,
        hints=("authorization",),
    ),
    # A high-entropy value assigned to a name such as password, token or api_key. The name
    # keyword starts a word or a camelCase part and ends one (``tokenizer`` is no token);
    # searching for the keyword first keeps the scan linear on hostile text.
    _pattern(
        "secret-assignment",
        r"(?i)(?:(?<![A-Za-z])|(?-i:(?<=[a-z])(?=[A-Z])))((?:" + _SECRET_NAMES + r")s?"
        r"(?-i:(?![a-z]))[A-Za-z0-9_.-]{0,40}+)"
        r"[\"']?\s*(?::|=|:=|=>)\s*[\"']?([^\s\"'`,;(){}\[\]<>]{12,})(?![^\s\"'`,;])",
        group=2,
        name_group=1,
        min_entropy=3.5,
        needs_digit_and_letter=True,
        hints=_NAME_HINTS,
    ),
)
"""The built-in credential patterns, most specific first."""


_PLACEHOLDER = re.compile(
    r"^(?:\$|<|\{|%|\(|\[)|(?:xxxx|\*\*\*\*|\.\.\.|example|placeholder|changeme|redacted|your[_-])"
    r"|^(?:pass(?:word)?|passwd|pwd|secret|token|user(?:name)?)$"
    r"|^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)+$",
    re.IGNORECASE,
)
"""Values that stand for a secret rather than being one: ${VAR}, <token>, xxxx, your_key..."""


NOT_A_SECRET_NAME = re.compile(
    r"(?i)(?:id|ids|name|url|uri|endpoint|path|file|dir|type|count|length|len|size|env|var"
    r"|ttl|expiry|expires|header|field|hash|policy|scope)$"
)
"""Name endings that say the value is about a secret, not the secret: ``private_key_id``."""


_URL_VALUE = re.compile(r"^[a-z][a-z0-9+.-]*://", re.IGNORECASE)


def shannon_entropy(value: str) -> float:
    """Bits of entropy per character of ``value`` (0 for the empty string)."""
    if not value:
        return 0.0
    counts = Counter(value)
    total = len(value)
    return -sum(n / total * math.log2(n / total) for n in counts.values())


def plausible(pattern: SecretPattern, secret: str) -> bool:
    """Whether a match is a credential rather than a placeholder, a word or a reference."""
    if pattern.min_entropy is None and not pattern.needs_digit_and_letter:
        return True  # a fixed-format token: its shape alone says what it is
    if _PLACEHOLDER.search(secret) or _URL_VALUE.match(secret):
        return False
    if pattern.needs_digit_and_letter and not (
        any(c.isdigit() for c in secret) and any(c.isalpha() for c in secret)
    ):
        return False
    return pattern.min_entropy is None or shannon_entropy(secret) >= pattern.min_entropy


_FOLDS = str.maketrans({"\u0131": "i", "\u017f": "s"})
"""The characters ``(?i)`` matches to an ASCII letter but ``str.lower()`` keeps (dotless i,
long s): else ``pa\u017fsword = <secret>`` would lack the hint ``passw``."""


def hint_text(text: str) -> str:
    """``text.lower()`` with :data:`_FOLDS` applied: what :func:`needed` looks for hints in."""
    low = text.lower()
    return low if low.isascii() else low.translate(_FOLDS)


def needed(patterns: Sequence[SecretPattern], lowered: str) -> list[SecretPattern]:
    """The patterns, in order, that can match a text whose :func:`hint_text` is ``lowered``."""
    return [p for p in patterns if not p.hints or any(h in lowered for h in p.hints)]


def find(
    text: str, patterns: Sequence[SecretPattern] = DEFAULT_PATTERNS, allow: Sequence[Matcher] = ()
) -> list[tuple[int, int, SecretPattern]]:
    """Each credential in ``text``: ``(start, end, pattern)`` of the secret itself, in order.
    Where two patterns cover the same characters, the earlier pattern's match is kept."""
    found: list[tuple[int, int, SecretPattern]] = []
    for pattern in needed(patterns, hint_text(text)):
        for match in pattern.regex.finditer(text):
            start, end = match.span(pattern.group)  # a store's group: checked when read
            secret = text[start:end]
            if start < 0 or not secret or not plausible(pattern, secret):
                continue
            if pattern.name_group is not None and NOT_A_SECRET_NAME.search(
                match.group(pattern.name_group) or ""
            ):
                continue
            if any(a.search(secret) for a in allow):
                continue
            if any(start < t_end and t_start < end for t_start, t_end, _ in found):
                continue
            found.append((start, end, pattern))
    return sorted(found, key=lambda hit: hit[0])


def line_at(text: str, pos: int) -> tuple[int, int]:
    """The start and end of the line of ``text`` that holds ``pos``."""
    end = text.find("\n", pos)
    return text.rfind("\n", 0, pos) + 1, len(text) if end < 0 else end


def secret_spans(
    text: str,
    patterns: Sequence[SecretPattern] = DEFAULT_PATTERNS,
    allow: Sequence[Matcher] = (),
    *,
    honour_marker: bool = False,
) -> list[tuple[int, int, str]]:
    """:func:`find` as ``(start, end, kind)``; ``honour_marker`` skips marked lines."""
    return [
        (start, end, pattern.kind)
        for start, end, pattern in find(text, patterns, allow)
        if not honour_marker or ALLOW_MARKER not in text[slice(*line_at(text, start))]
    ]


def redact(text: str) -> str:
    """``text`` with every credential the built-in patterns find replaced by ``[kind]``, lines
    holding :data:`ALLOW_MARKER` too: every error message passes through it."""
    out: list[str] = []
    pos = 0
    for start, end, kind in secret_spans(text):
        out += [text[pos:start], f"[{kind}]"]
        pos = end
    return "".join(out) + text[pos:]


_URL_USERINFO = re.compile(r"(\w+://)[^/@\s]+@")


def redact_remote(text: str) -> str:
    """Text from git talking to a remote: the user part of every URL masked as ``***``
    (``https://user:token@host``), then whatever else :func:`redact` finds."""
    return redact(_URL_USERINFO.sub(r"\1***@", text))
