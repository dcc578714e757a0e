"""Lifecycle commands: ``gitmem stale``, ``check``, ``prune`` and ``validate``."""

from __future__ import annotations

import click

from gitmem.cli.common import State, agent_state, emitted, json_state, scope_option, table
from gitmem.features.lifecycle.anchors import check_project
from gitmem.features.lifecycle.staleness import store_staleness
from gitmem.format.model import UNTITLED


@click.command()
@scope_option
@click.option("--all", "show_all", is_flag=True, help="List fresh memories too.")
@json_state
def stale(state: State, scope: str | None, show_all: bool) -> None:
    """Staleness of the current memories: fresh, aging or stale (lifecycle.staleness).

    \b
    Example:
      gitmem stale --json
    """
    report = store_staleness(state.store(), scope=scope)
    if emitted(state, report):
        return
    click.echo(
        f"{len(report.fresh)} fresh, {len(report.aging)} aging, {len(report.stale)} stale "
        f"(fresh <= {report.policy.fresh_days} days, aging <= {report.policy.aging_days})"
    )
    entries = [*report.stale, *report.aging, *(report.fresh if show_all else [])]
    if entries:
        rows = ([e.id, str(e.staleness), _days(e.days_since_update), e.path or ""] for e in entries)
        click.echo(table(["ID", "STALENESS", "DAYS", "PATH"], rows))


def _days(days: int | None) -> str:
    return "-" if days is None else str(days)


@click.command()
@click.option(
    "--project", "project", required=True, metavar="PATH",
    type=click.Path(exists=True, file_okay=False),
    help="The project repository whose HEAD the memories are compared with.",
)
@click.option(
    "--flag", is_flag=True, help="Mark the reported memories for verification (one commit)."
)
@click.option("--verbose", "-v", is_flag=True, help="List each memory and what changed.")
@json_state
def check(state: State, project: str, flag: bool, verbose: bool) -> None:
    """Report memories whose project files (anchors, `inline/code.py`) changed since.

    \b
    Example:
      gitmem check --project ~/src/my-api --flag
    """
    report = check_project(state.store(), project, flag=flag)
    if emitted(state, report):
        return
    click.echo(report.summary())
    if verbose:
        for memory in report.memories:
            label = "flagged earlier" if memory.already_flagged else "needs verification"
            click.echo(f"  {memory.id} ({memory.title or UNTITLED}): {label}")
            if memory.already_flagged and memory.reason:
                click.echo(f"    {memory.reason}")
            for finding in memory.findings:
                click.echo(f"    {finding.describe()} [{finding.source}]")


@click.command()
@click.option(
    "--scope", "prune_scope", type=click.Choice(["all", "project", "skill"]), default="all",
    show_default=True, help="Which layered documents to prune.",
)
@click.option("--project", "-p", help="The project (required with --scope project).")
@click.option("--skill", help="The skill (required with --scope skill).")
@click.option("--dry-run", is_flag=True, help="Report what would change; write nothing.")
@agent_state
def prune(
    state: State, prune_scope: str, project: str | None, skill: str | None, dry_run: bool,
    agent: str | None,
) -> None:
    """Apply the prune rules of each layered document's file type, in one commit.

    \b
    Example:
      gitmem prune --scope project -p my-api --dry-run
    """
    from gitmem.features.layered import LayeredStore, PrunePolicy

    policy = PrunePolicy(scope=prune_scope, project=project, skill=skill, dry_run=dry_run)
    report = LayeredStore(state.store(), agent=agent).prune(policy)
    if emitted(state, report):
        return
    verb = "would prune" if report.dry_run else "pruned"
    click.echo(f"{verb} {len(report.pruned)} section(s)" + (
        f" in commit {report.commit[:10]}" if report.commit else ""))
    for item in report.pruned:
        where = f" [{item.section}]" if item.section else ""
        click.echo(f"  {item.action}: {item.id}{where}: {item.reason}")
    for warning in report.warnings:
        click.echo(f"gitmem: warning: {warning}", err=True)


@click.command()
@click.argument("doc_id", metavar="ID", required=False)
@click.option("--all", "every", is_flag=True, help="Validate every layered document.")
@json_state
def validate(state: State, doc_id: str | None, every: bool) -> None:
    """Quality checks of layered documents: completeness, specificity, growth.

    \b
    Example:
      gitmem validate --all --json
    """
    from gitmem.features.layered import LayeredStore

    if (doc_id is None) == (not every):
        raise click.UsageError("give one ID or --all")
    store = state.store()
    layered = LayeredStore(store)
    if doc_id is not None:
        doc_id = store.resolve_id(doc_id)  # a unique id prefix will do
    results = layered.validate_all() if every else [layered.validate(doc_id or "")]
    if emitted(state, results if every else results[0]):
        return
    for result in results:
        checks = result["checks"]
        parts = []
        if checks.get("completeness") is not None:
            parts.append("complete" if checks["completeness"]["complete"] else "incomplete")
        parts.append("specific" if checks["specificity"]["specific"] else "unspecific")
        if checks.get("growthRate") is not None:
            parts.append(f"growth {checks['growthRate']['status']}")
        click.echo(f"{result['id']}: {', '.join(parts)}")
        for suggestion in result["suggestions"]:
            click.echo(f"  - {suggestion}")
