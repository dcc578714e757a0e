"""``gitmem trust``: which stores' git settings may run programs on this machine."""

from __future__ import annotations

from pathlib import Path

import click

from gitmem.cli.common import State, emitted, json_state, output, store_location
from gitmem.git import localconfig
from gitmem.git import trust as _trust


@click.command(name="trust")
@click.argument("path", required=False, type=click.Path(file_okay=False, path_type=Path))
@click.option("--list", "list_", is_flag=True, help="Show the trusted stores.")
@click.option("--remove", is_flag=True, help="Stop trusting PATH.")
@json_state
def trust(state: State, path: Path | None, list_: bool, remove: bool) -> None:
    """Trust a store's own git settings on this machine (like git's safe.directory).

    \b
    Example:
      gitmem trust ~/src/app/.gitmem
    """
    if list_:
        entries = _trust.trusted()
        if not emitted(state, {"config": str(localconfig.config_path()), "trusted": entries}):
            click.echo("\n".join([f"# {localconfig.config_path()}", *entries]))
        return
    target = path if path is not None else store_location(state.store_path)[1]
    if remove:
        removed = _trust.untrust(target)
        gitdir = str(_trust.git_dir_of(target))
        verb = "no longer trusted" if removed else "was not trusted"
        output(state, {"removed": removed, "store": gitdir}, f"{verb}: {gitdir}")
        return
    gitdir = str(_trust.trust(target))
    output(state, {"trusted": gitdir}, f"trusted: {gitdir}")
