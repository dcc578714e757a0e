"""The ``gitmem`` command line: click commands, one module per area, thin over the library.

Each command opens the store, calls one library method and prints the result
(text, or JSON with ``--json``). Errors are turned into one line on stderr and
the error's exit code in one place (:mod:`gitmem.cli.errors`).
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from gitmem._version import __version__
from gitmem.base import logs
from gitmem.base.errors import InvalidInputError
from gitmem.base.printable import printable
from gitmem.cli.common import (
    State,
    SuggestingGroup,
    _set_json,
    json_option,
    resolve_with_suggestions,
)
from gitmem.cli.errors import report

__all__ = ["cli", "main"]


def _install_warning_printer() -> None:
    """The library's logged warnings as ``gitmem: warning: ...`` lines on the current stderr
    (installed when the first record is logged: :func:`gitmem.base.logs.when_logging`)."""
    import logging

    class WarningPrinter(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            level = "warning" if record.levelno >= logging.WARNING else record.levelname.lower()
            click.echo(f"gitmem: {level}: {printable(record.getMessage())}", err=True)

    logger = logging.getLogger("gitmem")
    if not any(type(h).__name__ == "WarningPrinter" for h in logger.handlers):
        # Propagation stays on: with a handler here, Python's last-resort printer is
        # not used, and handlers further up (an embedding app, pytest) still see records.
        logger.addHandler(WarningPrinter(logging.WARNING))


def _log_to_stderr() -> None:
    logs.when_logging(_install_warning_printer)


# Command name -> "module:attribute" under gitmem.cli, in the order `gitmem --help` lists them
# (the order of a workflow). Modules are imported only when their command runs, so a git hook
# calling `gitmem hook-run` does not pay for importing every area of the command line.
# A module that is not there (an area still being built on a branch) is left out of the
# listing rather than breaking every other command.
LAZY_COMMANDS: dict[str, str] = {
    "init": "store:init",
    "status": "store:status",
    "add": "memory:add",
    "show": "memory:show",
    "edit": "memory:edit",
    "update": "memory:update",
    "append": "memory:append",
    "supersede": "memory:supersede",
    "rm": "memory:rm",
    "restore": "memory:restore",
    "ls": "store:ls",
    "history": "store:history",
    "log": "store:log",
    "search": "index:search",
    "recall": "index:recall",
    "reindex": "index:reindex",
    "gc": "index:gc",
    "migrate": "index:migrate",
    "stale": "lifecycle:stale",
    "check": "lifecycle:check",
    "prune": "lifecycle:prune",
    "validate": "lifecycle:validate",
    "layer": "layer:layer",
    "remote": "collab:remote",
    "sync": "collab:sync",
    "update-branch": "collab:update_branch",
    "conflicts": "collab:conflicts",
    "resolve": "collab:resolve",
    "review": "collab:review",
    "blame": "collab:blame",
    "diff": "collab:diff",
    "undo": "collab:undo",
    "merge-driver": "collab:merge_driver",
    "clone": "collab:clone",
    "join": "collab:join",
    "ci": "collab:ci",
    "entity": "integrations:entity",
    "graph": "integrations:graph",
    "mcp": "integrations:mcp",
    "serve": "integrations:serve",
    "import": "integrations:import_",
    "export": "integrations:export",
    "doctor": "doctor:doctor",
    "secrets": "doctor:secrets",
    "purge": "purge:purge",
    "demo": "demo:demo",
    "hooks": "hooks:hooks",
    "trust": "trust:trust",
    "hook-run": "hooks:hook_run",
}


def _load(name: str) -> click.Command | None:
    module_name, _, attribute = LAZY_COMMANDS[name].partition(":")
    qualified = f"{__name__}.{module_name}"
    try:
        module = importlib.import_module(qualified)
    except ModuleNotFoundError as exc:
        if exc.name == qualified:
            return None
        raise
    command = getattr(module, attribute, None)
    return command if isinstance(command, click.Command) else None


# The sections of `gitmem --help`, in order. A command in LAZY_COMMANDS that no section
# names is listed under "other", so a helper adding a command needs only its LAZY_COMMANDS line.
SECTIONS: dict[str, tuple[str, ...]] = {
    "Memories": ("init", "add", "show", "edit", "update", "append", "supersede", "rm", "restore"),
    "History": ("ls", "history", "log", "blame", "diff", "undo"),
    "Search": ("search", "recall"),
    "Layered documents": ("layer", "stale", "check", "prune", "validate"),
    "Collaboration": (
        "clone", "join", "remote", "sync", "update-branch", "conflicts", "resolve", "review",
        "ci", "merge-driver",
    ),
    "Integrations": ("entity", "graph", "mcp", "import", "export"),
    "Maintenance": (
        "status", "doctor", "secrets", "trust", "purge", "reindex", "gc", "migrate", "hooks",
        "demo",
    ),
}

# Options of the whole command line that are also accepted after the command name
# (`gitmem ls --store X`): added to every command that does not have an option of that
# name already (`demo --store` and `mcp --store` keep theirs).
_TRAILING_GLOBALS = ("--store", "--json", "--debug", "--allow-secrets")


def _set_store(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.ensure_object(State).store_path = value


def _set_allow_secrets(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(State).allow_secrets = True


def _trailing_option(name: str) -> click.Option:
    if name == "--store":
        return click.Option(
            ["--store"], metavar="PATH", expose_value=False, callback=_set_store,
            is_eager=True, help="The store to use (same as before the command name).",
        )
    if name == "--json":
        return click.Option(
            ["--json"], is_flag=True, expose_value=False, callback=_set_json, hidden=True
        )
    if name == "--debug":
        return click.Option(
            ["--debug"], is_flag=True, expose_value=False, callback=_set_debug, is_eager=True,
            hidden=True,
        )
    return click.Option(
        ["--allow-secrets"], is_flag=True, expose_value=False, callback=_set_allow_secrets,
        hidden=True,
    )


def _with_globals(command: click.Command) -> click.Command:
    """``command`` (and every subcommand of a group) taking the global options too."""
    if getattr(command, "_gitmem_globals", False):
        return command
    taken = {opt for param in command.params for opt in getattr(param, "opts", ())}
    for name in _TRAILING_GLOBALS:
        if name not in taken:
            command.params.append(_trailing_option(name))
    if isinstance(command, click.Group):
        for sub in command.commands.values():
            _with_globals(sub)
        if not isinstance(command, SuggestingGroup):
            base = type(command).resolve_command
            command.resolve_command = functools.partial(  # type: ignore[method-assign]
                resolve_with_suggestions, command, base=base
            )
    command._gitmem_globals = True  # type: ignore[attr-defined]
    return command


def _text_args_last(args: list[str]) -> list[str]:
    """Arguments such as ``"- a bullet"`` (a dash, then a space) are text, never an option:
    move them after a ``--`` at the end, so ``gitmem append ID "- bullet"`` needs no ``--``.
    Positional order is kept among them; an explicit ``--`` leaves everything as given."""
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
    """Arguments that are not UTF-8 (Python keeps their bytes as lone surrogates) are
    refused as invalid input, naming the argument, before anything tries to store them."""
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
        names = [name for name in LAZY_COMMANDS if name not in self.commands]
        return list(self.commands) + [name for name in names if _load(name) is not None]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            command = _load(cmd_name)
        return None if command is None else _with_globals(command)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands under the sections of SECTIONS, the rest under "Other"."""
        listed: dict[str, click.Command] = {}
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                listed[name] = command
        if not listed:
            return
        width = formatter.width - 6 - max(len(name) for name in listed)
        placed: set[str] = set()
        groups: list[tuple[str, list[str]]] = []
        for title, names in SECTIONS.items():
            present = [name for name in names if name in listed]
            placed.update(present)
            if present:
                groups.append((title, present))
        rest = [name for name in listed if name not in placed]
        if rest:
            groups.append(("Other", rest))
        for title, members in groups:
            with formatter.section(title):
                formatter.write_dl(
                    [(name, listed[name].get_short_help_str(width)) for name in members]
                )

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        **extra: Any,
    ) -> Any:
        state: State = extra.setdefault("obj", State())
        _log_to_stderr()
        argv = list(sys.argv[1:] if args is None else args)
        if not standalone_mode:
            _check_utf8(argv)
            argv = _text_args_last(argv)
            return super().main(argv, prog_name, complete_var, standalone_mode=False, **extra)
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


def _set_debug(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.ensure_object(State).debug = True


@click.group(
    name="gitmem", cls=GitmemGroup, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.option(
    "--store",
    "store_path",
    metavar="PATH",
    help="The store to use (default: $GITMEM_DIR, the project's .gitmem/, else $GITMEM_HOME).",
)
@json_option
@click.option(
    "--debug",
    is_flag=True,
    is_eager=True,
    expose_value=False,
    callback=_set_debug,
    envvar="GITMEM_DEBUG",
    help="Show the traceback when something fails.",
)
@click.option(
    "--allow-secrets",
    is_flag=True,
    help="Store content that looks like a credential (refused otherwise).",
)
@click.option(
    "--branch",
    metavar="NAME",
    help="Write to (and read from) this branch: a proposal for review, made from main "
    "(default: the branch checked out; main in a bare store).",
)
@click.version_option(__version__, prog_name="gitmem")
@click.pass_context
def cli(
    ctx: click.Context, store_path: str | None, allow_secrets: bool, branch: str | None
) -> None:
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
    state = ctx.ensure_object(State)
    if store_path is not None:
        state.store_path = store_path
    state.allow_secrets = allow_secrets
    state.branch = branch


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The console script ``gitmem`` (and ``python -m gitmem``).

    Called with ``argv`` (a test, an embedding program) it ends in ``SystemExit`` as any
    click program does. As the process's own entry point (no ``argv``) it ends the process
    with :func:`_exit_now` instead.
    """
    if argv is not None:
        cli.main(args=argv, prog_name="gitmem")
        raise SystemExit(0)  # cli.main always exits; this keeps the type checker honest
    try:
        cli.main(args=None, prog_name="gitmem")
    except SystemExit as done:
        _exit_now(done.code)
    _exit_now(0)


def _exit_now(code: object) -> NoReturn:
    """End the process once its work is done, without tearing the interpreter down.

    Python's own exit frees every module and object one by one and closes the index's
    SQLite connection, which checkpoints its write-ahead log into the database: 10-30 ms
    of every command, longer than some commands' work. Nothing of
    gitmem's needs it: every write is committed (git objects and refs, SQLite
    transactions) before the command returns, files are closed by their ``with`` blocks,
    and a write-ahead log left behind is a valid part of the database (the next
    connection reads it; SQLite checkpoints it as it grows). What an exit must still do is
    done here: the ``atexit`` handlers run (``weakref.finalize`` cleanups among them) and
    stdout and stderr are flushed. While another thread runs, the normal exit is kept
    (it waits for non-daemon threads).
    """
    import atexit
    import os
    import threading

    if threading.active_count() > 1:
        raise SystemExit(code)
    if code is None:
        status = 0
    elif isinstance(code, int):
        status = code
    else:  # SystemExit("message"): printed, status 1, as Python does
        print(code, file=sys.stderr)
        status = 1
    try:
        atexit._run_exitfuncs()
        sys.stdout.flush()
        sys.stderr.flush()
    except BaseException:  # a closed pipe, a handler failing: exit as Python would
        raise SystemExit(code) from None
    os._exit(status & 0xFF)
