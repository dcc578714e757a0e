"""One error hierarchy for everything gitmem raises on purpose: each error carries the
``exit_code`` the command line exits with and a ``hint`` saying what to do.
"""

from __future__ import annotations


class GitmemError(Exception):
    """Base of every error gitmem raises deliberately."""

    exit_code: int = 1
    default_hint: str = ""

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # Never echo a secret: a check that quotes the value it refuses (an id, a tag, a
        # schema error) may run before the credential scan does, and errors end up in logs.
        message = _redact(message)
        super().__init__(message)
        self.message = message
        self.hint = _redact(hint) if hint is not None else self.default_hint

    def __str__(self) -> str:
        return self.message


class NotFoundError(GitmemError, LookupError):
    """A memory, revision or store that was asked for does not exist."""

    exit_code = 3


class InvalidInputError(GitmemError, ValueError):
    """The caller passed something gitmem cannot accept."""

    exit_code = 4


class InvalidIdError(InvalidInputError):
    """An id or name that is unsafe or malformed (path traversal, control characters...)."""


class InvalidMemoryError(InvalidInputError):
    """A memory file or front-matter that does not parse or does not match the schema."""


class AmbiguousIdError(InvalidInputError):
    """An id prefix that names more than one memory; ``candidates`` are their full ids."""

    def __init__(
        self, message: str, *, candidates: list[str] | None = None, hint: str | None = None
    ) -> None:
        super().__init__(message, hint=hint)
        self.candidates = list(candidates or [])


class TooLargeError(InvalidInputError):
    """A body or front-matter over the configured size bound."""


class RegexTimeoutError(InvalidInputError):
    """A user's pattern ran past its time bound (gitmem.format.saferegex)."""


class AlreadyExistsError(GitmemError):
    """A memory with that id is already stored."""

    exit_code = 5


class ConflictError(GitmemError):
    """Someone else changed the memory first, or the write lost every retry."""

    exit_code = 6


class DirtyWorktreeError(ConflictError):
    """A write would overwrite a file in the work tree that has uncommitted edits."""

    default_hint = "commit or discard the edit (git -C STORE status) and try again"


class StoreError(GitmemError):
    """The store itself is missing, not a gitmem store, or damaged."""

    exit_code = 7


class UnsupportedFormatError(StoreError):
    """The store is written in a newer format than this gitmem knows: refused, not misread."""

    default_hint = (
        "upgrade gitmem (pip install -U gitmem-store) to use this store; "
        "nothing was read or changed"
    )


class OldFormatError(UnsupportedFormatError):
    """The store is written in an older format, which only ``gitmem migrate`` reads."""

    default_hint = "run gitmem migrate (one commit per scope); nothing was read or changed"


class RepositoryDamagedError(StoreError):
    """An object the store needs is missing from git's object database or cannot be read."""

    default_hint = (
        "the repository is damaged, not the derived index (rebuilding that cannot help): run "
        "git -C STORE fsck --full to list what is missing or corrupt, move each corrupt object "
        "file it names aside, then fetch the objects from a clone "
        "(git -C STORE fetch CLONE 'refs/heads/*:refs/remotes/clone/*') or clone the store "
        "again from the hub"
    )


class IndexDamagedError(StoreError):
    """The derived index holds what gitmem could not have written; it is rebuilt from git."""

    default_hint = "run gitmem reindex to rebuild the derived index from the repository"


class LockTimeoutError(ConflictError):
    """A lock stayed held by a live process for longer than the wait bound."""


class EmbedderError(GitmemError):
    """An embedder could not be loaded or did not answer (recall then runs lexical only)."""

    default_hint = "check the embedder section of your local config (docs/recall.md)"


class MissingDependencyError(GitmemError):
    """An extra (``mcp``, ``anthropic``, ``embed``...) is not installed; the hint says how."""

    exit_code = 9

    def __init__(self, message: str, *, extra: str) -> None:
        super().__init__(message, hint=f"install it with: {install_command(extra)}")
        self.extra = extra


def require_extra(extra: str, what: str, *modules: str) -> None:
    """Raise :class:`MissingDependencyError` naming the ``modules`` of ``extra`` not installed."""
    import importlib.util

    absent = [name for name in modules if importlib.util.find_spec(name) is None]
    if absent:
        raise MissingDependencyError(
            f"{what} needs {', '.join(absent)} (the {extra} extra), which is not installed",
            extra=extra,
        )


def install_command(extra: str) -> str:
    """How to add ``extra`` to the running gitmem: its interpreter's pip (or uv's) and where
    it came from (its ``direct_url.json``: a checkout, wheel or repository), else the index."""
    import json
    import shlex
    import sys
    import urllib.parse
    from importlib import metadata

    spec, editable, installer = f"gitmem-store[{extra}]", False, "pip"
    try:
        dist = metadata.distribution("gitmem-store")
        installer = (dist.read_text("INSTALLER") or "pip").strip()
        origin = json.loads(dist.read_text("direct_url.json") or "null")
    except (metadata.PackageNotFoundError, ValueError, OSError):
        origin = None
    if isinstance(origin, dict) and isinstance(origin.get("url"), str):
        url = origin["url"]
        vcs = origin.get("vcs_info")
        if url.startswith("file://") and isinstance(origin.get("dir_info"), dict):
            editable = bool(origin["dir_info"].get("editable"))
            spec = f"{urllib.parse.unquote(urllib.parse.urlparse(url).path)}[{extra}]"
        elif isinstance(vcs, dict):
            rev = vcs.get("requested_revision")
            spec = f"{spec} @ {vcs.get('vcs', 'git')}+{url}{f'@{rev}' if rev else ''}"
        else:
            spec = f"{spec} @ {url}"
    args = " ".join(shlex.quote(a) for a in (["-e", spec] if editable else [spec]))
    if installer == "uv":
        return f"uv pip install --python {shlex.quote(sys.executable)} {args}"
    return f"{shlex.quote(sys.executable)} -m pip install {args}"


EXIT_CODES: dict[str, int] = {
    "error": GitmemError.exit_code,
    "usage": 2,
    "not-found": NotFoundError.exit_code,
    "invalid-input": InvalidInputError.exit_code,
    "already-exists": AlreadyExistsError.exit_code,
    "conflict": ConflictError.exit_code,
    "store": StoreError.exit_code,
    "missing-dependency": MissingDependencyError.exit_code,
    # Not an error: `gitmem review --strict` ran and found problems to fix before merging.
    # A code of its own, so CI can tell "the memories need work" from "gitmem broke" (1).
    "review-problems": 8,
}
"""Documented exit codes of the command line, by name (docs/cli.md)."""


def _redact(text: str) -> str:
    # Imported on first error, not with this module: compiling the patterns is a cost
    # a run that raises nothing never pays.
    from gitmem.base.redact import redact

    return redact(str(text))
