"""``gitmem purge``: remove a memory, or every match of a pattern, from all of history."""

from __future__ import annotations

import click

from gitmem.cli.common import State, emitted, json_state
from gitmem.features import purge as _purge


@click.command()
@click.argument("memory_id", metavar="[ID]", required=False)
@click.option("--pattern", metavar="REGEX", help="Replace every match of this regular expression.")
@click.option(
    "--secrets", "all_secrets", is_flag=True,
    help="Replace every credential the store's policy finds (as gitmem secrets --history).",
)
@click.option(
    "--apply", is_flag=True, help="Rewrite history. Without it: a dry run that changes nothing."
)
@click.option("--dry-run", is_flag=True, help="Say what would be removed (the default).")
@click.option("--scope", metavar="repo|user", help="The store to purge, when both are open.")
@click.option("--remote", metavar="NAME", help="The hub to give push steps for (default: origin).")
@json_state
def purge(
    state: State, memory_id: str | None, pattern: str | None, all_secrets: bool, apply: bool,
    dry_run: bool, scope: str | None, remote: str | None,
) -> None:
    """Remove a memory, or every match of a pattern, from ALL of history.

    A dry run unless --apply, which rewrites the branches and prints the steps
    for the hub and every clone. Exit 1: nothing matched.

    \b
    Example:
      gitmem purge --pattern 'ACME-[0-9]{6}' --apply
    """
    if apply and dry_run:
        raise click.UsageError("give --apply or --dry-run, not both")
    if sum([memory_id is not None, pattern is not None, all_secrets]) != 1:
        raise click.UsageError("give one of ID, --pattern REGEX or --secrets")
    report = _purge.purge(
        state.store(), memory=memory_id, pattern=pattern, secrets=all_secrets, apply=apply,
        scope=scope, remote=remote,
    )
    if emitted(state, report):
        pass
    elif not report.found:
        click.echo(f"Nothing to purge: {report.target} is in no commit.")
    else:
        verb = "Removed" if report.applied else "Would remove"
        click.echo(f"{verb} {report.target} from {report.scope} history:")
        for removal in report.removals:
            click.echo(f"  {removal.line()}")
        done = "rewritten" if report.applied else "to rewrite"
        click.echo(f"{report.commits_rewritten} commit(s) {done}.")
        if not report.applied:
            click.echo("Dry run: nothing was changed. Run again with --apply to rewrite.")
        click.echo("Then, to make the old objects really go:")
        for line in _purge.format_steps(report.steps):
            click.echo(line)
    if not report.found:
        raise click.exceptions.Exit(1)
