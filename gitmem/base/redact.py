"""Credentials in text, as the built-in patterns find them, and text with them redacted.

Here in the base layer so every error message can be redacted; a store's own patterns and
scanning memories and commits are :mod:`gitmem.format.secrets`, built on this.
"""

from __future__ import annotations

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
    description: str = ""
    group: int | str = 0
    """The regex group that is the secret itself (masked in excerpts, checked for entropy)."""
    keep: int = 0
    """Leading characters of the secret shown unmasked: a fixed public prefix such as ``ghp_``."""
    min_entropy: float | None = None
    """Shannon entropy (bits per character) the secret must reach: tells keys from prose."""
    needs_digit_and_letter: bool = False
    name_group: int | None = None
    """The regex group holding the assigned name, if any: names of things that are not secrets
    (``private_key_id``, ``token_url``) are not reported."""
    hints: tuple[str, ...] = ()
    """Lowercase substrings one of which every match contains: a text holding none is
    skipped without running the regex. Empty: always run."""


class LazyPattern:
    """A built-in regex compiled when a text first needs it (most never run in a process)."""

    __slots__ = ("_compiled", "pattern")

    def __init__(self, pattern: str) -> None:
        self.pattern = pattern
        self._compiled: re.Pattern[str] | None = None

    def compiled(self) -> re.Pattern[str]:
        if self._compiled is None:
            self._compiled = re.compile(self.pattern)
        return self._compiled

    def finditer(self, string: str) -> Iterator[re.Match[str]]:
        return self.compiled().finditer(string)

    def search(self, string: str) -> re.Match[str] | None:
        return self.compiled().search(string)


_SECRET_NAMES = (
    r"password|passwd|passphrase|pwd|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|client[_-]?secret|auth[_-]?token|credentials?|bearer|session[_-]?key"
    r"|signing[_-]?key|encryption[_-]?key"
)


def _pattern(kind: str, regex: str, description: str, **options: Any) -> SecretPattern:
    return SecretPattern(kind, LazyPattern(regex), description, **options)


_NAME_HINTS = ("passw", "passphrase", "pwd", "secret", "token", "key", "credential", "bearer")


# Order matters: where two patterns cover the same characters, the earlier one is reported
# (a GCP key's embedded PEM header is one gcp-service-account-key, not also a private-key).
#
# A kind with a distinctive prefix (ghp_, hf_, sk-ant-, ...) is bounded on the left by a
# letter or digit only, never by ``_`` or ``-``: ids and names are snake- or kebab-case, and
# ``mem_ghp_...`` or ``svc-hf_...`` must still be found (the prefix and length alone tell it
# from prose). Where a kind's own characters exclude ``_``, its right bound does too.
DEFAULT_PATTERNS: tuple[SecretPattern, ...] = (
    _pattern(
        "gcp-service-account-key",
        r'"private_key"\s*:\s*"(-----BEGIN [A-Z ]*PRIVATE KEY-----[^"]*)',
        "the private key of a Google Cloud service-account JSON key file",
        group=1,
        keep=11,
        hints=("private_key",),
    ),
    _pattern(
        "private-key",
        r"-----BEGIN ((?:RSA|DSA|EC|OPENSSH|ENCRYPTED|PGP|SSH2) )?PRIVATE KEY( BLOCK)?-----",
        "a PEM/OpenSSH/PGP private-key block (reported at its BEGIN line)",
        keep=64,
        hints=("private key",),
    ),
    _pattern(
        "aws-access-key-id",
        r"(?<![A-Z0-9])((?:AKIA|ASIA|ABIA|ACCA|AIDA|AROA|ANPA)[A-Z0-9]{16})(?![A-Z0-9])",
        "an AWS access key id (long-term AKIA..., temporary ASIA...)",
        group=1,
        keep=4,
        hints=("akia", "asia", "abia", "acca", "aida", "aroa", "anpa"),
    ),
    _pattern(
        "aws-secret-access-key",
        r"(?i)(?:aws)?_?secret_?(?:access)?_?key[\"']?\s*[:=]\s*[\"']?"
        r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])",
        "an AWS secret access key assigned to a name such as aws_secret_access_key",
        group=1,
        min_entropy=3.5,
        hints=("secret",),
    ),
    _pattern(
        "google-api-key",
        r"(?<![A-Za-z0-9])(AIza[0-9A-Za-z_-]{35})(?![A-Za-z0-9_-])",
        "a Google API key",
        group=1,
        keep=4,
        hints=("aiza",),
    ),
    _pattern(
        "github-token",
        r"(?<![A-Za-z0-9])((?:ghp|gho|ghs|ghu|ghr)_[A-Za-z0-9]{36,255})(?![A-Za-z0-9])",
        "a GitHub personal, OAuth, app or refresh token",
        group=1,
        keep=4,
        hints=("ghp_", "gho_", "ghs_", "ghu_", "ghr_"),
    ),
    _pattern(
        "github-fine-grained-token",
        r"(?<![A-Za-z0-9])(github_pat_[A-Za-z0-9_]{22,255})(?![A-Za-z0-9_])",
        "a GitHub fine-grained personal access token",
        group=1,
        keep=11,
        hints=("github_pat_",),
    ),
    _pattern(
        "gitlab-token",
        r"(?<![A-Za-z0-9])(gl(?:pat|dt|ptt|rt|oas)-[A-Za-z0-9_-]{20,}+)(?![A-Za-z0-9_-])",
        "a GitLab personal, deploy, trigger or runner token",
        group=1,
        keep=6,
        hints=("glpat-", "gldt-", "glptt-", "glrt-", "gloas-"),
    ),
    _pattern(
        "slack-token",
        r"(?<![A-Za-z0-9])(xox[abposre]-[A-Za-z0-9-]{10,}+)(?![A-Za-z0-9-])",
        "a Slack bot, user, app or refresh token",
        group=1,
        keep=5,
        hints=("xox",),
    ),
    _pattern(
        "slack-webhook",
        r"https://hooks\.slack\.com/(?:services|workflows)/(T[A-Za-z0-9_/]{8,})",
        "a Slack incoming-webhook URL",
        group=1,
        keep=1,
        hints=("hooks.slack.com",),
    ),
    _pattern(
        "anthropic-api-key",
        r"(?<![A-Za-z0-9])(sk-ant-[a-z]+\d*-[A-Za-z0-9_-]{32,})(?![A-Za-z0-9_-])",
        "an Anthropic API key",
        group=1,
        keep=7,
        hints=("sk-ant-",),
    ),
    _pattern(
        "openai-api-key",
        r"(?<![A-Za-z0-9])(sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{16,}T3BlbkFJ[A-Za-z0-9_-]{16,})",
        "an OpenAI API key",
        group=1,
        keep=3,
        hints=("t3blbkfj",),
    ),
    _pattern(
        "openai-api-key",
        # Project, service-account and admin keys issued since 2024 need not carry the
        # T3BlbkFJ marker; their prefix and length alone tell them from prose.
        r"(?<![A-Za-z0-9])(sk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{40,})(?![A-Za-z0-9_-])",
        "an OpenAI project, service-account or admin key",
        group=1,
        keep=8,
        hints=("sk-proj-", "sk-svcacct-", "sk-admin-"),
    ),
    _pattern(
        "huggingface-token",
        r"(?<![A-Za-z0-9])(hf_[A-Za-z0-9]{30,})(?![A-Za-z0-9])",
        "a Hugging Face access token",
        group=1,
        keep=3,
        hints=("hf_",),
    ),
    _pattern(
        "npm-token",
        r"(?<![A-Za-z0-9])(npm_[A-Za-z0-9]{36})(?![A-Za-z0-9])",
        "an npm access token",
        group=1,
        keep=4,
        hints=("npm_",),
    ),
    _pattern(
        "pypi-token",
        r"(?<![A-Za-z0-9])(pypi-AgEIcHlwaS5vcmc[A-Za-z0-9_-]{50,})",
        "a PyPI API token",
        group=1,
        keep=5,
        hints=("pypi-ageichlwas5vcmc",),
    ),
    _pattern(
        "sendgrid-api-key",
        r"(?<![A-Za-z0-9])(SG\.[A-Za-z0-9_-]{22}\.[A-Za-z0-9_-]{43})(?![A-Za-z0-9_-])",
        "a SendGrid API key",
        group=1,
        keep=3,
        hints=("sg.",),
    ),
    _pattern(
        "stripe-key",
        r"(?<![A-Za-z0-9])((?:sk|rk)_live_[A-Za-z0-9]{20,})(?![A-Za-z0-9])",
        "a Stripe live secret or restricted key",
        group=1,
        keep=8,
        hints=("_live_",),
    ),
    _pattern(
        "jwt",
        r"(?<![A-Za-z0-9])(eyJ[A-Za-z0-9_-]{8,}+\.eyJ[A-Za-z0-9_-]{8,}+\.[A-Za-z0-9_-]{16,}+)",
        "a JSON Web Token (signed bearer credential)",
        group=1,
        keep=3,
        hints=("eyj",),
    ),
    _pattern(
        "url-credentials",
        r"://[^\s:/@]{1,256}:([^\s:/@]{3,256})@[^\s/@]+",
        "a password embedded in a URL (scheme://user:password@host)",
        group=1,
        min_entropy=1.0,
        hints=("://",),
    ),
    _pattern(
        "authorization-header",
        r"(?i)\bauthorization\s*:\s*(?:bearer|basic|token)\s+([A-Za-z0-9._~+/=-]{16,})",
        "an HTTP Authorization header with a credential",
        group=1,
        min_entropy=3.0,
        hints=("authorization",),
    ),
    _pattern(
        "secret-assignment",
        # The name keyword starts a word or a camelCase part and ends one (``tokenizer`` is no
        # token); searching for the keyword first keeps the scan linear on hostile text.
        r"(?i)(?:(?<![A-Za-z])|(?-i:(?<=[a-z])(?=[A-Z])))((?:" + _SECRET_NAMES + r")s?"
        r"(?-i:(?![a-z]))[A-Za-z0-9_.-]{0,40}+)"
        r"[\"']?\s*(?::|=|:=|=>)\s*[\"']?([^\s\"'`,;(){}\[\]<>]{12,})(?![^\s\"'`,;])",
        "a high-entropy value assigned to a name such as password, token or api_key",
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
"""The characters ``(?i)`` matches to an ASCII letter although ``str.lower()`` keeps them
(dotless i, long s): without them, ``pa\u017fsword = <secret>`` would skip its pattern for
want of the hint ``passw``."""


def hint_text(text: str) -> str:
    """``text.lower()`` with :data:`_FOLDS` applied: what :func:`needed` looks for hints in."""
    low = text.lower()
    return low if low.isascii() else low.translate(_FOLDS)


def needed(patterns: Sequence[SecretPattern], lowered: str) -> list[SecretPattern]:
    """The patterns, in their order, that can match a text whose :func:`hint_text` is
    ``lowered``: those without hints and those with a hint in it."""
    return [p for p in patterns if not p.hints or any(h in lowered for h in p.hints)]


def find(
    text: str, patterns: Sequence[SecretPattern] = DEFAULT_PATTERNS, allow: Sequence[Matcher] = ()
) -> list[tuple[int, int, SecretPattern]]:
    """Each credential in ``text``: ``(start, end, pattern)`` of the secret itself, in order.
    Where two patterns cover the same characters, the earlier pattern's match is kept."""
    found: list[tuple[int, int, SecretPattern]] = []
    for pattern in needed(patterns, hint_text(text)):
        for match in pattern.regex.finditer(text):
            try:
                start, end = match.span(pattern.group)
            except (IndexError, re.error):
                start, end = match.span()
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
    """:func:`find` as ``(start, end, kind)``; ``honour_marker`` skips lines holding
    :data:`ALLOW_MARKER` (as a scan does)."""
    return [
        (start, end, pattern.kind)
        for start, end, pattern in find(text, patterns, allow)
        if not honour_marker or ALLOW_MARKER not in text[slice(*line_at(text, start))]
    ]


def redact(text: str) -> str:
    """``text`` with every credential the built-in patterns find replaced by ``[kind]``.

    Every error message passes through it, so a check that echoes a refused value never
    prints a token; lines holding :data:`ALLOW_MARKER` are redacted too."""
    spans = secret_spans(text)
    if not spans:
        return text
    out: list[str] = []
    pos = 0
    for start, end, kind in spans:
        out.append(text[pos:start])
        out.append(f"[{kind}]")
        pos = end
    out.append(text[pos:])
    return "".join(out)


_URL_USERINFO = re.compile(r"(\w+://)[^/@\s]+@")


def redact_remote(text: str) -> str:
    """Text from git talking to a remote (its messages, its progress lines): the user part of
    every URL (``https://user:token@host``, ``https://token@host``) masked as ``***``, then
    whatever else :func:`redact` finds."""
    return redact(_URL_USERINFO.sub(r"\1***@", text))
