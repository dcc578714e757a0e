"""Quality checks of the layered documents, pure functions over markdown: completeness,
specificity, growth and accuracy suggestions (docs/lifecycle-rules.md states the heuristics).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

from gitmem.features.lifecycle.prune import LifecycleConfigError, whole_number
from gitmem.features.lifecycle.rules import lifecycle_settings
from gitmem.features.lifecycle.sections import fenced_lines, field_of, heading_of, lines_of


@dataclass(frozen=True)
class QualityPolicy:
    max_unspecific_ratio: float = 0.3
    growth_window: int = 5
    accuracy_every_writes: int = 5
    accuracy_claims: int = 3

    def __post_init__(self) -> None:
        ratio = self.max_unspecific_ratio
        if isinstance(ratio, bool) or not isinstance(ratio, int | float) or not 0 <= ratio <= 1:
            raise LifecycleConfigError(
                "gitmem.yaml lifecycle.quality.max_unspecific_ratio must be a number "
                f"from 0 to 1, not {ratio!r}"
            )
        for name, minimum in (
            ("growth_window", 2),
            ("accuracy_every_writes", 1),
            ("accuracy_claims", 1),
        ):
            whole_number(getattr(self, name), f"lifecycle.quality.{name}", minimum)

    @classmethod
    def from_config(cls, config: Mapping[str, Any] | None) -> QualityPolicy:
        """``lifecycle.quality``: committed values only on the strict side of the defaults,
        the user's own settings as given."""
        tighter = frozenset({"accuracy_claims"})
        return cls(**lifecycle_settings(config, "quality", asdict(cls()), tighter))


@dataclass(frozen=True)
class _Line:
    number: int  # 1-based
    text: str
    fenced: bool


def _scan(body: str) -> list[_Line]:
    return [
        _Line(number, line.rstrip("\n"), fenced)
        for number, (line, fenced) in enumerate(fenced_lines(lines_of(body)), 1)
    ]


_VERSION = r"[ \t]*(?:version[ \t]*)?[:(=>~^@ \t-]{0,4}[ \t]*v?\d+(?:\.(?:\d+|x))*"
_LANGUAGES = (
    r"Python|JavaScript|TypeScript|Node(?:\.js|JS)?|Rust|Java|Kotlin|Ruby|PHP|C#|C\+\+|"
    r"Swift|Scala|Elixir|Erlang|Haskell|Dart|Lua|Perl|Clojure|F#|Objective-C|Zig|Julia|"
    r"Bash|Deno|Bun|OCaml|Groovy|Solidity"
)
_LANGUAGE_RE = re.compile(
    rf"(?<![\w+#.])(?:(?i:{_LANGUAGES})|Go|Golang|golang)(?![A-Za-z_+#]){_VERSION}"
)
_FRAMEWORKS = (
    r"Django|Flask|FastAPI|Starlette|Pyramid|Tornado|aiohttp|Sanic|Litestar|Streamlit|"
    r"React(?: Native)?|Vue(?:\.js)?|Angular|Svelte(?:Kit)?|Next\.js|Nuxt(?:\.js)?|Remix|"
    r"Gatsby|Astro|Solid(?:JS)?|Ember(?:\.js)?|Express(?:\.js)?|NestJS|Nest\.js|Fastify|Koa|"
    r"Hono|Electron|Tauri|Spring(?: Boot)?|Quarkus|Micronaut|Ruby on Rails|Rails|Sinatra|"
    r"Laravel|Symfony|ASP\.NET(?: Core)?|\.NET(?: Core)?|Blazor|Gin|Echo|Fiber|Actix(?:-web)?|"
    r"Axum|Rocket|Phoenix|Flutter|Qt|Ktor|Vapor|SwiftUI|Jetpack Compose|Bevy"
)
_FRAMEWORK_RE = re.compile(rf"(?<![\w.])(?i:{_FRAMEWORKS})(?![A-Za-z_+#]){_VERSION}")
_ANY_VERSION_RE = re.compile(r"(?<![\w.])v?\d+(?:\.(?:\d+|x))+|(?<![\w.])v\d+\b")
_ARCHITECTURE_RE = re.compile(
    r"\b(?:MVC|MVVM|MVP|micro-?services?|modular monolith|monolith(?:ic)?|layered|n-tier|"
    r"three-tier|hexagonal|clean architecture|onion architecture|ports (?:and|&) adapters|"
    r"event[- ]driven|event sourcing|CQRS|serverless|client[- ]server|service[- ]oriented|"
    r"SOA|domain[- ]driven|DDD|repository pattern|pipes? and filters|plugin[- ]based|"
    r"pub/sub|publish[- ]subscribe|single[- ]page application|SPA|actor model|"
    r"model[- ]view[- ]controller)\b",
    re.I,
)
_CONVENTION_RE = re.compile(
    r"\b(?:ruff|black|flake8|pylint|isort|mypy|pyright|eslint|prettier|biome|stylelint|"
    r"gofmt|goimports|golangci-lint|rustfmt|clippy|rubocop|standardrb|ktlint|detekt|"
    r"checkstyle|spotless|php-cs-fixer|swiftlint|editorconfig|pre-commit|"
    r"snake_case|camelCase|PascalCase|kebab-case|SCREAMING_SNAKE_CASE|PEP ?8|"
    r"conventional commits)\b",
    re.I,
)
_TESTING_RE = re.compile(
    r"\b(?:pytest|unittest|nose2?|hypothesis|tox|nox|jest|vitest|mocha|jasmine|karma|"
    r"cypress|playwright|puppeteer|selenium|junit|testng|mockito|rspec|minitest|phpunit|"
    r"pest|xunit|nunit|mstest|testify|go test|cargo test|testing[- ]library|"
    r"unit tests?|integration tests?|end[- ]to[- ]end tests?|e2e|TDD|BDD|property[- ]based|"
    r"snapshot tests?|test coverage|code coverage)\b",
    re.I,
)

_TOPICS: dict[str, re.Pattern[str]] = {
    "language_version": re.compile(r"\b(?:languages?|runtime|stack)\b", re.I),
    "framework_version": re.compile(r"\b(?:frameworks?|stack)\b", re.I),
    "architecture_pattern": re.compile(r"\barchitecture\b", re.I),
    "conventions": re.compile(
        r"\b(?:conventions?|code style|coding style|style guide|naming)\b", re.I
    ),
    "testing_approach": re.compile(r"\b(?:test|tests|testing)\b", re.I),
}
_DETECTION: dict[str, str] = {
    "language_version": "a known language followed by a version (Python 3.11, Go 1.22, "
    "Node.js 20), or a Language/Runtime field whose value has a version",
    "framework_version": "a known framework followed by a version (Django 5.0, React 18), "
    "or a Framework field whose value has a version",
    "architecture_pattern": "a known pattern (MVC, hexagonal, microservices, event-driven, "
    "layered ...), or an Architecture heading or field with content",
    "conventions": "a linter, formatter or naming style (ruff, eslint, snake_case ...), "
    "or a Conventions/Code Style/Naming heading or field with content",
    "testing_approach": "a test tool or kind (pytest, jest, unit tests, e2e ...), or a "
    "Testing heading or field with content",
}
COMPLETENESS_CHECKS: tuple[str, ...] = tuple(_DETECTION)
_TERMS = (_LANGUAGE_RE, _FRAMEWORK_RE, _ARCHITECTURE_RE, _CONVENTION_RE, _TESTING_RE)


def _field(line: str, topic: re.Pattern[str], versioned: bool) -> bool:
    """A field line about ``topic`` whose value has a version (``versioned``) or any content."""
    parsed = field_of(line)
    if parsed is None or topic.search(parsed[0]) is None:
        return False
    return _ANY_VERSION_RE.search(parsed[1]) is not None if versioned else bool(parsed[1])


def _headings_with_content(lines: Sequence[_Line], topic: re.Pattern[str]) -> Iterator[_Line]:
    """Headings about ``topic`` with a non-blank line (theirs or a subsection's)."""
    for i, line in enumerate(lines):
        head = None if line.fenced else heading_of(line.text)
        if head is None or not topic.search(head[1]):
            continue
        for later in lines[i + 1 :]:
            sub = None if later.fenced else heading_of(later.text)
            if sub is not None and sub[0] <= head[0]:
                break
            if sub is None and later.text.strip():
                yield line
                break


def completeness(body: str) -> dict[str, Any]:
    """The five checks of a project_overview, each met by the first prose line that matches
    (``line``, 1-based, and ``evidence`` say where)."""
    lines = [line for line in _scan(body) if not line.fenced]
    prose = [line for line in lines if heading_of(line.text) is None]
    checks: list[dict[str, Any]] = []
    for name, terms in zip(COMPLETENESS_CHECKS, _TERMS, strict=True):
        topic, versioned = _TOPICS[name], name.endswith("_version")
        hit = next(
            (x for x in prose if terms.search(x.text) or _field(x.text, topic, versioned)), None
        )
        if hit is None and not versioned:
            hit = next(_headings_with_content(lines, topic), None)
        line, evidence = (None, None) if hit is None else (hit.number, hit.text.strip())
        checks.append(
            {
                "name": name,
                "found": hit is not None,
                "line": line,
                "evidence": evidence,
                "detection": _DETECTION[name],
            }
        )
    missing = [c["name"] for c in checks if not c["found"]]
    return {
        "complete": not missing,
        "foundCount": len(checks) - len(missing),
        "total": len(checks),
        "missing": missing,
        "checks": checks,
    }


ClaimKind = Literal["bullet", "sentence"]
_BULLET_RE = re.compile(r"^[ \t]*(?:[-*+]|\d{1,9}[.)])[ \t]+(?:\[[ xX]\][ \t]+)?(.*)$")
_RULE_RE = re.compile(r"^[ \t]{0,3}(?:(?:-[ \t]*){3,}|(?:\*[ \t]*){3,}|(?:_[ \t]*){3,})$")
_MARKER_RE = re.compile(r"^[ \t]*\[VERIFY [A-Z ]+\]")
_QUOTE_RE = re.compile(r"^[ \t]*>[ \t]?")
_SPAN_RE = re.compile(r"(`+)(.+?)\1")

_EXTENSIONS = (
    "py|pyi|pyx|ipynb|js|jsx|mjs|cjs|ts|tsx|mts|cts|go|rs|java|kt|kts|rb|php|cs|fs|cpp|cc|"
    "cxx|c|h|hh|hpp|m|mm|swift|scala|ex|exs|erl|hs|dart|lua|pl|r|jl|sh|bash|zsh|fish|ps1|"
    "sql|md|mdx|rst|txt|json|jsonc|yaml|yml|toml|ini|cfg|conf|env|lock|xml|html|htm|css|"
    "scss|sass|less|vue|svelte|astro|gradle|proto|graphql|gql|tf|hcl|mk|cmake|csv|tsv|"
    "dockerfile|service|plist|sol|zig|nix"
)
_SLASH_PATH_RE = re.compile(
    r"(?<![\w/:.@-])(?:\.{1,2}/|~/)?[\w.@-]+(?:(?:/[\w.@-]+)+/?|/)(?![\w/])"
)
_FILE_NAME_RE = re.compile(
    rf"(?<![\w/.@-])[\w-]+(?:\.[\w-]+)*\.(?:{_EXTENSIONS})(?![\w-])"
    r"|\b(?:Makefile|Dockerfile|Containerfile|Gemfile|Rakefile|Procfile|Jenkinsfile|"
    r"Vagrantfile|Justfile|CMakeLists\.txt)\b",
    re.I,
)
# Product names spelled like files: not paths.
_NOT_FILES = frozenset(
    f"{name}.js"
    for name in (
        "node", "next", "vue", "nuxt", "express", "three", "d3", "chart", "ember",
        "backbone", "angular", "react", "nest", "solid", "alpine", "socket", "p5", "moment",
    )
)  # fmt: skip
_EXT_TAIL_RE = re.compile(r"\.[A-Za-z][A-Za-z0-9]{0,9}$")
_LINE_REF_RE = re.compile(
    r"(?<=[A-Za-z_)`\]]):\d+(?:[-:]\d+)?\b"
    r"|#L\d+(?:-L?\d+)?\b"
    r"|\blines?[ \t]+\d+(?:[ \t]*[-\u2013][ \t]*\d+)?\b",
    re.I,
)
_CALL_RE = re.compile(r"(?<![\w.])([A-Za-z_][\w.]*)\(([^()\n]{0,80})\)")
_CAMEL_RE = re.compile(r"[a-z][A-Z]")
_SENTENCE_END_RE = re.compile(r"[.!?][)\]\"'*_]*(?=\s)")


@dataclass(frozen=True)
class Claim:
    """A bullet item or a paragraph sentence, with what makes it specific."""

    text: str
    line: int  # 1-based line of the body where it starts
    kind: ClaimKind
    paths: tuple[str, ...] = ()
    line_refs: tuple[str, ...] = ()
    identifiers: tuple[str, ...] = ()

    @property
    def specific(self) -> bool:
        return bool(self.paths or self.line_refs or self.identifiers)

    @property
    def weight(self) -> int:
        """How concrete: a path 4, a line number 2, an identifier 1 (summed)."""
        return 4 * bool(self.paths) + 2 * bool(self.line_refs) + bool(self.identifiers)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "line": self.line,
            "kind": self.kind,
            "specific": self.specific,
            "paths": list(self.paths),
            "lineRefs": list(self.line_refs),
            "identifiers": list(self.identifiers),
        }


def _is_path(token: str) -> bool:
    token = token.rstrip(".,;:")
    if "/" in token:
        if token.startswith(("./", "../", "~/")) or token.endswith("/"):
            return True
        return token.count("/") >= 2 or _EXT_TAIL_RE.search(token) is not None
    return token.lower() not in _NOT_FILES


def references(text: str) -> tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]:
    """``(paths, line_refs, identifiers)`` named in ``text``, in order (docs/lifecycle-rules.md)."""
    paths: list[str] = []
    for match in _SLASH_PATH_RE.finditer(text):
        if _is_path(match.group(0)):
            paths.append(match.group(0).rstrip(".,;:"))
    for match in _FILE_NAME_RE.finditer(text):
        token = match.group(0)
        if _is_path(token) and not any(token in p for p in paths):
            paths.append(token)
    line_refs = [m.group(0) for m in _LINE_REF_RE.finditer(text)]
    identifiers: list[str] = []
    for match in _SPAN_RE.finditer(text):
        content = match.group(2).strip()
        # A span that is a path is already counted as one.
        if re.search(r"[A-Za-z_]", content) and content.rstrip(".,;:") not in paths:
            identifiers.append(content)
    outside = _SPAN_RE.sub(" ", text)
    for match in _CALL_RE.finditer(outside):
        name, args = match.group(1), match.group(2)
        if not args or "_" in name or "." in name or _CAMEL_RE.search(name):
            identifiers.append(f"{name}({args})")
    return tuple(paths), tuple(line_refs), tuple(identifiers)


def _split_sentences(text: str) -> list[tuple[int, str]]:
    """``(offset, sentence)`` pieces of a paragraph, never cut inside a code span."""
    spans = [(m.start(), m.end()) for m in _SPAN_RE.finditer(text)]
    pieces: list[tuple[int, str]] = []
    start = 0
    for match in _SENTENCE_END_RE.finditer(text):
        end = match.end()
        if any(a <= match.start() < b for a, b in spans):
            continue
        pieces.append((start, text[start:end]))
        start = end
    pieces.append((start, text[start:]))
    return [(offset, piece) for offset, piece in pieces if piece.strip()]


def claims(body: str) -> list[Claim]:
    """Bullet items and paragraph sentences outside code, tables, comments and markers."""
    out: list[Claim] = []
    current: list[tuple[int, str]] = []  # (line number, text) of the open block
    current_kind: ClaimKind | None = None
    in_comment = False

    def flush() -> None:
        nonlocal current, current_kind
        if current_kind == "bullet":
            _add(out, "bullet", current[0][0], " ".join(t.strip() for _, t in current))
        elif current_kind == "sentence":
            _add_paragraph(out, current)
        current, current_kind = [], None

    for line in _scan(body):
        text = line.text
        if in_comment:
            if "-->" in text:
                in_comment = False
            continue
        if line.fenced:
            flush()
            continue
        stripped = text.strip()
        if stripped.startswith("<!--"):
            flush()
            in_comment = "-->" not in stripped
            continue
        text = _QUOTE_RE.sub("", text)
        stripped = text.strip()
        if (
            not stripped
            or heading_of(text) is not None
            or stripped.startswith("|")
            or _RULE_RE.match(text)
            or _MARKER_RE.match(text)
        ):
            flush()
            continue
        bullet = _BULLET_RE.match(text)
        if bullet is not None:
            flush()
            current, current_kind = [(line.number, bullet.group(1))], "bullet"
        elif current_kind is not None:
            current.append((line.number, text))
        else:
            current, current_kind = [(line.number, text)], "sentence"
    flush()
    return out


def _add(out: list[Claim], kind: ClaimKind, line: int, text: str) -> None:
    text = " ".join(text.split())
    if not text or text.endswith(":"):
        return
    paths, line_refs, identifiers = references(text)
    out.append(Claim(text, line, kind, paths, line_refs, identifiers))


def _add_paragraph(out: list[Claim], lines: Sequence[tuple[int, str]]) -> None:
    # A field line ("**Status**: open", "Language: Python") starts a new sentence group.
    groups: list[list[tuple[int, str]]] = []
    for number, text in lines:
        if not groups or field_of(text) is not None:
            groups.append([])
        groups[-1].append((number, text))
    for group in groups:
        joined = ""
        starts: list[tuple[int, int]] = []  # (offset in joined, line number)
        for number, text in group:
            if joined:
                joined += "\n"
            starts.append((len(joined), number))
            joined += text
        for offset, sentence in _split_sentences(joined):
            leading = len(sentence) - len(sentence.lstrip())
            at = offset + leading
            number = max(n for o, n in starts if o <= at)
            _add(out, "sentence", number, sentence)


def specificity(body: str, max_unspecific_ratio: float = 0.3) -> dict[str, Any]:
    """Specific unless more than ``max_unspecific_ratio`` of the claims are unspecific."""
    found = claims(body)
    unspecific = [c.to_dict() for c in found if not c.specific]
    ratio = len(unspecific) / len(found) if found else 0.0
    return {
        "specific": ratio <= max_unspecific_ratio,
        "claimCount": len(found),
        "unspecificCount": len(unspecific),
        "unspecificRatio": round(ratio, 4),
        "threshold": max_unspecific_ratio,
        "unspecificClaims": unspecific,
    }


def growth_rate(line_counts: Sequence[int], window: int = 5) -> dict[str, Any]:
    """Growth from the line counts after each of the file's last writes, oldest first:
    ``unknown`` below ``window`` writes, else ``healthy`` when the window's last count is
    above its first."""
    counts = list(line_counts)
    recent = counts[-window:] if len(counts) >= window else counts
    change = recent[-1] - recent[0] if len(counts) >= window else None
    status = "unknown" if change is None else "healthy" if change > 0 else "stagnant"
    return {"status": status, "writes": len(counts), "lineCounts": recent, "change": change}


def _short(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3].rstrip() + "..."


def accuracy_suggestions(
    body: str, write_count: int, *, every: int = 5, count: int = 3
) -> list[dict[str, Any]]:
    """On every ``every``-th write, up to ``count`` claims to check, the most concrete first;
    unspecific ones only fill up to two."""
    if write_count <= 0 or write_count % every:
        return []
    found = claims(body)
    ranked = sorted((c for c in found if c.specific), key=lambda c: -c.weight)[:count]
    if len(ranked) < min(2, count):
        ranked += [c for c in found if not c.specific][: min(2, count) - len(ranked)]
    out: list[dict[str, Any]] = []
    for claim in ranked:
        names = claim.paths + claim.line_refs + claim.identifiers
        if names:
            what = ", ".join(dict.fromkeys(names))
            text = f'line {claim.line}: "{_short(claim.text)}" - is it still true of {what}?'
        else:
            text = (
                f'line {claim.line}: "{_short(claim.text)}" - still true? '
                "Name the file or function it is about."
            )
        out.append({"claim": claim.text, "line": claim.line, "suggestion": text})
    return out


_CHECK_LABELS = {
    "language_version": "the language and its version (e.g. 'Python 3.11')",
    "framework_version": "the framework and its version (e.g. 'Django 5.0')",
    "architecture_pattern": "the architecture pattern (an Architecture section)",
    "conventions": "the conventions (naming, formatter, linter)",
    "testing_approach": "the testing approach (tools, kinds of tests)",
}


def validate_document(
    file_type: str,
    body: str,
    *,
    line_counts: Sequence[int] = (),
    write_count: int = 0,
    policy: QualityPolicy | None = None,
) -> dict[str, Any]:
    """The checks that apply to ``file_type`` (``line_counts`` oldest first), and what to do
    about them in words (docs/lifecycle-rules.md shows the shape)."""
    policy = policy or QualityPolicy()
    complete = completeness(body) if file_type == "project_overview" else None
    specific = specificity(body, policy.max_unspecific_ratio)
    growth = (
        growth_rate(line_counts, policy.growth_window) if file_type == "common_patterns" else None
    )
    accuracy = accuracy_suggestions(
        body, write_count, every=policy.accuracy_every_writes, count=policy.accuracy_claims
    )
    suggestions: list[str] = []
    if complete is not None:
        suggestions += [f"Add {_CHECK_LABELS[name]}." for name in complete["missing"]]
    if not specific["specific"]:
        example = specific["unspecificClaims"][0]
        suggestions.append(
            f"{specific['unspecificCount']} of {specific['claimCount']} claims name no file "
            f"path, line number or function (more than {policy.max_unspecific_ratio:.0%}); "
            f'e.g. line {example["line"]}: "{_short(example["text"], 80)}".'
        )
    if growth is not None and growth["status"] == "stagnant":
        suggestions.append(
            f"{file_type} has not grown over its last {len(growth['lineCounts'])} writes: "
            "record the patterns learned since."
        )
    suggestions += [f"Check {a['suggestion']}" for a in accuracy]
    return {
        "fileType": file_type,
        "checks": {"completeness": complete, "specificity": specific, "growthRate": growth},
        "accuracy": accuracy,
        "suggestions": suggestions,
    }
