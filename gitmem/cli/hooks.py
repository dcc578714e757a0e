"""Git hooks: ``gitmem hooks install|uninstall|status`` and the hidden ``gitmem hook-run``."""

from __future__ import annotations

from pathlib import Path

import click

from gitmem.cli.common import State, SuggestingGroup, emitted, json_state, stacked
from gitmem.entry import hookrun
from gitmem.entry import hooks as _hooks
from gitmem.entry.hooks import Report

_where = stacked(  # the repository install, uninstall and status work on
    click.option(
        "--project", metavar="PATH", type=click.Path(file_okay=False, path_type=Path),
        help="A project repository (its post-merge, post-checkout and post-commit hooks run "
        "gitmem check); without it, the store's own repository.",
    ),
    click.option(
        "--server", metavar="HUB", type=click.Path(file_okay=False, exists=True, path_type=Path),
        help="A bare hub: its pre-receive hook refuses pushes with invalid memories or "
        "credentials.",
    ),
    json_state,
)


def _target(
    state: State, project: Path | None, server: Path | None = None, *, write: bool = False,
) -> tuple[Path, str]:
    """The repository to work on and its role: --server, --project, else the store's."""
    if project is None and server is None:
        return Path(state.store(write=write).db().path).resolve(), "memory"
    return _hooks.repository_for(project=project, server=server)


def _show(state: State, report: Report, verb: str) -> None:
    if emitted(state, report):
        return
    if verb:
        done = ", ".join(report.changed) if report.changed else "nothing (already so)"
        click.echo(f"{verb} in {report.hooks_dir}: {done}")
        return
    click.echo(f"hooks directory: {report.hooks_dir}")
    for hook in report.hooks:
        if hook.installed:
            chained = ", chained to the earlier hook" if hook.chained else ""
            old = ", outdated: gitmem hooks install updates it" if hook.outdated else ""
            what = f"gitmem ({hook.role}){chained}{old}"
        elif hook.foreign:
            what = "another hook (not gitmem's)"
        else:
            what = "none"
        click.echo(f"  {hook.name:<14} {what}")


@click.group(name="hooks", cls=SuggestingGroup)
def hooks() -> None:
    """Install, remove or show gitmem's git hooks (existing hooks still run first).

    \b
    Example:
      gitmem hooks install --project ~/src/app
    """


@hooks.command(name="install")
@_where
def install(state: State, project: Path | None, server: Path | None) -> None:
    """Install the hooks (again: harmless; an existing hook is chained)."""
    repo, role = _target(state, project, server, write=True)
    _show(state, _hooks.install(repo, role), "installed")


@hooks.command(name="uninstall")
@_where
def uninstall(state: State, project: Path | None, server: Path | None) -> None:
    """Remove gitmem's hooks and put back the hooks they replaced."""
    repo, _ = _target(state, project, server)
    _show(state, _hooks.uninstall(repo), "removed")


@hooks.command(name="status")
@_where
def status(state: State, project: Path | None, server: Path | None) -> None:
    """Show which hooks are installed."""
    repo, _ = _target(state, project, server)
    _show(state, _hooks.status(repo), "")


@click.command(
    name="hook-run", hidden=True,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.option(
    "--role", type=click.Choice(["auto", *_hooks.ROLES]), default="auto", show_default=True
)
@click.argument("name")
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
@click.pass_context
def hook_run(ctx: click.Context, role: str, name: str, args: tuple[str, ...]) -> None:
    """Do the work of git hook NAME (called by the installed hook scripts).

    \b
    Example:
      gitmem hook-run pre-commit
    """
    ctx.exit(hookrun.run(name, list(args), role=role))
