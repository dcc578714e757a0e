"""The ``gitmem`` command line: click commands, one module per area, thin over the library.

Each command opens the store, calls one library method and prints the result
(text, or JSON with ``--json``). Errors are turned into one line on stderr and
the error's exit code in one place (:mod:`gitmem.cli.errors`).
"""

from __future__ import annotations

import importlib
import logging
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

import click

from gitmem._version import __version__

from .common import State, json_option
from .errors import report

__all__ = ["cli", "main"]


class _WarningHandler(logging.Handler):
    """The library's logged warnings as ``gitmem: warning: ...`` lines on the current stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        level = "warning" if record.levelno >= logging.WARNING else record.levelname.lower()
        click.echo(f"gitmem: {level}: {record.getMessage()}", err=True)


def _log_to_stderr() -> None:
    logger = logging.getLogger("gitmem")
    if not any(isinstance(h, _WarningHandler) for h in logger.handlers):
        # Propagation stays on: with a handler here, Python's last-resort printer is
        # not used, and handlers further up (an embedding app, pytest) still see records.
        logger.addHandler(_WarningHandler(logging.WARNING))


# Command name -> "module:attribute" under gitmem.cli, in the order `gitmem --help` lists them
# (the order of a workflow). Modules are imported only when their command runs, so a git hook
# calling `gitmem hook-run` does not pay for importing every area of the command line.
# A module that is not there (an area still being built on a branch) is left out of the
# listing rather than breaking every other command.
LAZY_COMMANDS: dict[str, str] = {
    "init": "store:init",
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
    "reindex": "index:reindex",
    "gc": "index:gc",
    "stale": "lifecycle:stale",
    "check": "lifecycle:check",
    "prune": "lifecycle:prune",
    "validate": "lifecycle:validate",
    "layer": "forge:layer",
    "remote": "collab:remote",
    "sync": "collab:sync",
    "conflicts": "collab:conflicts",
    "resolve": "collab:resolve",
    "review": "collab:review",
    "blame": "collab:blame",
    "diff": "collab:diff",
    "undo": "collab:undo",
    "merge-driver": "collab:merge_driver",
    "ci": "collab:ci",
    "entity": "integrations:entity",
    "graph": "integrations:graph",
    "mcp": "integrations:mcp",
    "import": "integrations:import_",
    "export": "integrations:export",
    "doctor": "doctor:doctor",
    "secrets": "doctor:secrets",
    "demo": "demo:demo",
    "hooks": "hooks:hooks",
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


class GitmemGroup(click.Group):
    """A click group that reports every error as one line with the right exit code."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = [name for name in LAZY_COMMANDS if name not in self.commands]
        return list(self.commands) + [name for name in names if _load(name) is not None]

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        command = self.commands.get(cmd_name)
        if command is None and cmd_name in LAZY_COMMANDS:
            command = _load(cmd_name)
        return command

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
        if not standalone_mode:
            return super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        try:
            rv = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except SystemExit:
            raise
        except BaseException as exc:
            sys.exit(report(exc, debug=state.debug))
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
@click.version_option(__version__, prog_name="gitmem")
@click.pass_context
def cli(ctx: click.Context, store_path: str | None, allow_secrets: bool) -> None:
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
    3 not found, 4 invalid input, 5 already exists, 6 conflict, 7 store error.
    """
    state = ctx.ensure_object(State)
    if store_path is not None:
        state.store_path = store_path
    state.allow_secrets = allow_secrets


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """The console script ``gitmem``."""
    cli.main(args=argv, prog_name="gitmem")
    raise SystemExit(0)  # cli.main always exits; this keeps the type checker honest
