"""Errors to exit codes and one line on stderr, in one place: a :class:`gitmem.GitmemError`
carries its code and hint, click's usage errors exit 2, anything unexpected is one line and
exit 1. A traceback reaches the user only with ``--debug``."""

from __future__ import annotations

import errno
import sys
import traceback

import click

from gitmem.base.errors import EXIT_CODES, GitmemError, StoreError
from gitmem.base.printable import printable

UNEXPECTED = EXIT_CODES["error"]

_READ_ONLY_ERRNOS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})
_READ_ONLY_PHRASES = ("Read-only file system", "Permission denied")
READ_ONLY_HINT = (
    "the store is read-only for you: reading commands work, writing needs write access "
    "(run as the store's owner, or work on a copy: git clone STORE COPY)"
)


def describe(exc: BaseException) -> tuple[str, str, int]:
    """The message, hint and exit code to report for ``exc``."""
    if isinstance(exc, GitmemError):
        hint = exc.hint
        if not hint and any(s in exc.message for s in _READ_ONLY_PHRASES):
            hint = READ_ONLY_HINT  # a git process that could not write in the store
        return exc.message, hint, exc.exit_code
    if isinstance(exc, click.UsageError):
        command = exc.ctx.command_path if exc.ctx is not None else "gitmem"
        return exc.format_message(), f"see '{command} --help'", exc.exit_code
    if isinstance(exc, click.ClickException):
        return exc.format_message(), "", exc.exit_code
    if isinstance(exc, click.Abort):
        return "aborted", "", UNEXPECTED
    pygit2 = sys.modules.get("pygit2")  # a GitError exists only if pygit2 was loaded
    if pygit2 is not None and isinstance(exc, pygit2.GitError):
        # libgit2's object errors ("failed to inflate", "object not found") mean a damaged
        # repository: say what helps (git fsck, a clone), not nothing.
        from gitmem.base.errors import RepositoryDamagedError

        damaged = any(w in str(exc).lower() for w in ("inflate", "object", "corrupt", "odb"))
        hint = RepositoryDamagedError.default_hint if damaged else ""
        return f"git: {exc}", hint, StoreError.exit_code
    if isinstance(exc, OSError) and (exc.strerror or exc.errno in _READ_ONLY_ERRNOS):
        where = f"{exc.filename}: " if exc.filename else ""
        if exc.errno in _READ_ONLY_ERRNOS:
            return f"{where}{exc.strerror}", READ_ONLY_HINT, StoreError.exit_code
        return f"{where}{exc.strerror}", "", UNEXPECTED
    sqlite3 = sys.modules.get("sqlite3")
    if sqlite3 is not None and isinstance(exc, sqlite3.OperationalError):
        from gitmem.store import index_schema

        if index_schema.timed_out(exc):
            return index_schema.TIMED_OUT, index_schema.REINDEX_HINT, StoreError.exit_code
        if any(phrase in str(exc) for phrase in ("readonly", "unable to open", "read-only")):
            return f"the index cannot be written: {exc}", READ_ONLY_HINT, StoreError.exit_code
    name = type(exc).__name__
    return (
        f"unexpected {name}: {exc}" if str(exc) else f"unexpected {name}",
        "run again with --debug for the traceback, and please report it",
        UNEXPECTED,
    )


def report(exc: BaseException, *, debug: bool, as_json: bool = False) -> int:
    """Print ``exc`` as one line on stderr (after its traceback with --debug); return the code.
    ``as_json``: the line is ``{"error": {"code", "kind", "message", "hint"}}``, ``kind`` the
    code's name in EXIT_CODES (``not-found``)."""
    if isinstance(exc, click.UsageError) and type(exc).__name__ == "NoArgsIsHelpError":
        exc.show()  # plain `gitmem` (click >= 8.2): the help itself, not an error line
        return exc.exit_code
    if debug:
        click.echo("".join(traceback.format_exception(exc)).rstrip(), err=True)
    message, hint, code = describe(exc)
    if as_json:
        import json

        kind = next((name for name, value in EXIT_CODES.items() if value == code), "error")
        error = {"code": code, "kind": kind, "message": message, "hint": hint or None}
        # ASCII escapes: a name quoted from the store cannot reach the terminal raw.
        click.echo(json.dumps({"error": error}), err=True)
        return code
    line = " ".join(message.split())
    if hint:
        line += f" (hint: {' '.join(hint.split())})"
    # A message may quote a name read from the store, and text from the command line may
    # hold undecodable bytes (as lone surrogates): both shown escaped.
    click.echo(f"gitmem: error: {printable(line)}", err=True)
    return code
