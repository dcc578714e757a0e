"""``gitmem trust``: which stores' git settings may run programs on this machine."""

from __future__ import annotations

import os
from pathlib import Path

import click

from gitmem.cli.common import State, emit_json, json_option, pass_state
from gitmem.git import localconfig
from gitmem.git import trust as _trust


def _default_store(state: State) -> Path:
    """The store a bare ``gitmem trust`` means: the one gitmem would open here."""
    from gitmem.store.where import find_project_store, user_store_path

    if state.store_path is not None:
        return Path(state.store_path)
    if os.environ.get("GITMEM_DIR"):
        return Path(os.environ["GITMEM_DIR"])
    return find_project_store(Path.cwd()) or user_store_path()


@click.command(name="trust")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--list", "list_", is_flag=True, help="Show the trusted stores.")
@click.option("--remove", is_flag=True, help="Stop trusting PATH.")
@json_option
@pass_state
def trust(state: State, path: Path | None, list_: bool, remove: bool) -> None:
    """Trust a store's own git settings on this machine (like git's safe.directory).

    \b
    A store's git configuration can make git run programs: hooks, merge drivers,
    filters, remote.<name>.uploadpack. gitmem lets it only for stores you created
    with gitmem init (recorded then) or trust here; for any other store git runs
    without those settings. A store committed inside a project you cloned is not
    used at all until you name it with --store or trust it. The list lives in
    your own configuration file, never in a store. Trust decides nothing about
    Python code: prune rules and jobs come from installed packages and your
    configuration file only.

    \b
    Examples:
      gitmem trust                 # the store gitmem would use here
      gitmem trust ~/src/app/.gitmem
      gitmem trust --list
      gitmem trust --remove ~/src/app/.gitmem
    """
    if list_:
        entries = _trust.trusted()
        if state.json:
            emit_json({"config": str(localconfig.config_path()), "trusted": entries})
            return
        click.echo(f"# {localconfig.config_path()}")
        for entry in entries:
            click.echo(entry)
        return
    target = path if path is not None else _default_store(state)
    if remove:
        removed = _trust.untrust(target)
        gitdir = str(_trust.git_dir_of(target))
        if state.json:
            emit_json({"removed": removed, "store": gitdir})
        else:
            click.echo(f"no longer trusted: {gitdir}" if removed else f"was not trusted: {gitdir}")
        return
    gitdir = str(_trust.trust(target))
    if state.json:
        emit_json({"trusted": gitdir})
    else:
        click.echo(f"trusted: {gitdir}")
