"""The ``gitmem`` command line: one module per area; each command parses, calls the library
and prints (text, or JSON with ``--json``); errors become one line and an exit code in
:mod:`gitmem.cli.errors`."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from gitmem._version import __version__
from gitmem.base import logs
from gitmem.base.errors import InvalidInputError
from gitmem.base.printable import printable
from gitmem.cli.common import State, SuggestingGroup, json_option, sets
from gitmem.cli.errors import report

__all__ = ["cli", "main"]


def _log_to_stderr() -> None:
    """The library's logged warnings as ``gitmem: warning: ...`` lines on stderr, from the
    first record on (logging is not imported before)."""

    def install() -> None:
        import logging

        class WarningPrinter(logging.Handler):
            def emit(self, record: logging.LogRecord) -> None:  # warnings and worse only
                click.echo(f"gitmem: warning: {printable(record.getMessage())}", err=True)

        logger = logging.getLogger("gitmem")
        if not any(type(h).__name__ == "WarningPrinter" for h in logger.handlers):
            # Propagation stays on: handlers further up (an embedding app, pytest) still
            # see records, and Python's last-resort printer is not used.
            logger.addHandler(WarningPrinter(logging.WARNING))

    logs.when_logging(install)


# The sections of `gitmem --help`, each with its commands by module under gitmem.cli (the
# attribute: the name with "_" for "-"; import_). A module is imported only when one of its
# commands runs, so a git hook calling `gitmem hook-run` does not pay for the others.
SECTIONS: dict[str, dict[str, str]] = {
    "Memories": {
        "store": "init", "memory": "add show edit update append supersede invalidate rm restore"
    },
    "History": {"store": "ls history log", "collab": "blame diff undo"},
    "Search": {"index": "search recall"},
    "Layered documents": {"layer": "layer", "lifecycle": "stale check prune validate"},
    "Collaboration": {
        "collab": "clone join remote sync update-branch conflicts resolve review ci merge-driver "
        "branches"
    },
    "Integrations": {"integrations": "entity graph mcp serve import export"},
    "Maintenance": {
        "store": "status config", "doctor": "doctor secrets", "trust": "trust", "purge": "purge",
        "index": "reindex gc migrate", "hooks": "hooks hook-run", "demo": "demo",
    },
}
LAZY_COMMANDS: dict[str, str] = {
    name: f"{module}:{'import_' if name == 'import' else name.replace('-', '_')}"
    for modules in SECTIONS.values()
    for module, names in modules.items()
    for name in names.split()
}


def _load(name: str) -> click.Command:
    module, _, attribute = LAZY_COMMANDS[name].partition(":")
    command: click.Command = getattr(importlib.import_module(f"{__name__}.{module}"), attribute)
    return _with_globals(command)


# Options of the whole command line also accepted after the command name (`gitmem ls --store
# X`), with the State attribute each sets: added to every command without one of that name.
_TRAILING_GLOBALS = {
    "--store": "store_path", "--json": "json", "--debug": "debug",
    "--allow-secrets": "allow_secrets",
}


def _with_globals(command: click.Command) -> click.Command:
    """``command`` (and its subcommands) taking the global options too."""
    if getattr(command, "_gitmem_globals", False):
        return command
    taken = {opt for param in command.params for opt in getattr(param, "opts", ())}
    for name, attribute in _TRAILING_GLOBALS.items():
        if name not in taken:
            store = name == "--store"
            command.params.append(click.Option(
                [name], is_flag=not store, metavar="PATH" if store else None, hidden=not store,
                expose_value=False, callback=sets(attribute), is_eager=True,
                help="The store to use (same as before the command name)." if store else None,
            ))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _with_globals(sub)
    command._gitmem_globals = True  # type: ignore[attr-defined]
    return command


def _text_args_last(args: list[str]) -> list[str]:
    """Arguments such as ``"- a bullet"`` are text, never an option: moved after a ``--``
    at the end, in order (unless the user wrote a ``--``)."""
    if "--" in args:
        return args
    text: list[int] = []
    for i, arg in enumerate(args):
        if not (len(arg) > 1 and arg[0] == "-" and arg[1].isspace()):
            continue
        before = args[i - 1] if i else ""
        if len(before) > 1 and before[0] == "-" and "=" not in before:
            continue  # most likely an option's value (--content "- a"), which click takes as is
        text.append(i)
    if not text:
        return args
    return [a for i, a in enumerate(args) if i not in text] + ["--", *(args[i] for i in text)]


def _check_utf8(args: Sequence[str]) -> None:
    """Refuse an argument that is not UTF-8 (held as lone surrogates), naming it."""
    for number, arg in enumerate(args, 1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            raw = arg.encode("utf-8", "surrogateescape")
            shown = ascii(raw)[2:-1][:60]
            raise InvalidInputError(
                f"argument {number} ('{shown}') is not UTF-8 text",
                hint="gitmem takes text as UTF-8; convert it first (iconv -t UTF-8)",
            ) from None


class GitmemGroup(SuggestingGroup):
    """A click group that reports every error as one line with the right exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(LAZY_COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        return _load(cmd_name) if cmd_name in LAZY_COMMANDS else None

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands under the sections of SECTIONS."""
        width = formatter.width - 6 - max(map(len, LAZY_COMMANDS))
        for title, modules in SECTIONS.items():
            commands = [(n, _load(n)) for names in modules.values() for n in names.split()]
            with formatter.section(title):
                formatter.write_dl(
                    [(n, c.get_short_help_str(width)) for n, c in commands if not c.hidden]
                )

    def main(
        self, args: Sequence[str] | None = None, prog_name: str | None = None,
        complete_var: str | None = None, standalone_mode: bool = True, **extra: Any,
    ) -> NoReturn:
        state: State = extra.setdefault("obj", State())
        _log_to_stderr()
        argv = list(sys.argv[1:] if args is None else args)
        try:
            _check_utf8(argv)
            argv = _text_args_last(argv)
            rv = super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
        except SystemExit:
            raise
        except BaseException as exc:
            options = argv[: argv.index("--")] if "--" in argv else argv
            as_json = state.json or "--json" in options
            sys.exit(report(exc, debug=state.debug or "--debug" in options, as_json=as_json))
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(
    name="gitmem", cls=GitmemGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.option(
    "--store", metavar="PATH", expose_value=False, callback=sets("store_path"),
    help="The store to use (default: $GITMEM_DIR, the project's .gitmem/, else $GITMEM_HOME).",
)
@json_option
@click.option(
    "--debug", is_flag=True, is_eager=True, expose_value=False, callback=sets("debug"),
    envvar="GITMEM_DEBUG", help="Show the traceback when something fails.",
)
@click.option(
    "--allow-secrets", is_flag=True, expose_value=False, callback=sets("allow_secrets"),
    help="Store content that looks like a credential (refused otherwise).",
)
@click.option(
    "--branch", metavar="NAME", expose_value=False, callback=sets("branch"),
    help="Write to (and read from) this branch: a proposal for review, made from main "
    "(default: the branch checked out; main in a bare store).",
)
@click.version_option(__version__, prog_name="gitmem")
def cli() -> None:
    """gitmem: a Git-native versioned memory store.

    Memories are markdown files with YAML front-matter in a git repository;
    every write is one commit whose trailers say who remembered what.

    \b
    Examples:
      gitmem init ~/notes-store
      id=$(gitmem --store ~/notes-store add "Use pytest fixtures" --title Testing)
      gitmem --store ~/notes-store history "$id"
      GITMEM_HOME=./demo-store gitmem demo

    Errors are one line on stderr; exit codes: 1 unexpected, 2 usage,
    3 not found, 4 invalid input, 5 already exists, 6 conflict, 7 store error,
    9 missing dependency.
    """


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The console script ``gitmem``: with ``argv`` (a test) it raises ``SystemExit``;
    as the process's entry point it ends the process with :func:`_exit_now`."""
    if argv is not None:
        cli.main(args=argv, prog_name="gitmem")
    try:
        cli.main(args=None, prog_name="gitmem")
    except SystemExit as done:
        _exit_now(done.code)


def _exit_now(code: object) -> NoReturn:
    """End the process without Python's teardown (10-30 ms of every command; every write
    is committed by then), after the ``atexit`` handlers and flushing stdout and stderr."""
    import atexit
    import os
    import threading

    if threading.active_count() > 1:
        raise SystemExit(code)
    status = code if isinstance(code, int) else int(code is not None)
    if status and not isinstance(code, int):  # SystemExit("message"): printed, as Python does
        print(code, file=sys.stderr)
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # a closed pipe, a handler failing: exit as Python would
        raise SystemExit(code) from None
    os._exit(status & 0xFF)
