"""Lifecycle commands: ``gitmem stale`` and ``gitmem check``."""

from __future__ import annotations

import click

from gitmem.lifecycle import check_project, store_staleness

from .common import State, emit_json, json_option, pass_state, table


@click.command()
@click.option("--scope", metavar="repo|user", help="Only this store, when both are open.")
@click.option("--all", "show_all", is_flag=True, help="List fresh memories too.")
@json_option
@pass_state
def stale(state: State, scope: str | None, show_all: bool) -> None:
    """Staleness of the current memories: fresh, aging or stale.

    Days are counted from updated_at: 0-30 fresh, 31-90 aging, 91+ stale,
    or the thresholds under lifecycle.staleness in gitmem.yaml. Aging and
    stale memories are listed, oldest first; --all lists fresh ones too.

    \b
    Examples:
      gitmem stale
      gitmem stale --json
    """
    store = state.store()
    report = store_staleness(store, scope=scope)
    if state.json:
        emit_json(report.to_dict())
        return
    click.echo(
        f"{len(report.fresh)} fresh, {len(report.aging)} aging, {len(report.stale)} stale "
        f"(fresh <= {report.policy.fresh_days} days, aging <= {report.policy.aging_days})"
    )
    entries = [*report.stale, *report.aging, *(report.fresh if show_all else [])]
    if entries:
        rows = [
            [
                e.id,
                str(e.staleness),
                "-" if e.days_since_update is None else str(e.days_since_update),
                e.path or "",
            ]
            for e in entries
        ]
        click.echo(table(["ID", "STALENESS", "DAYS", "PATH"], rows))


@click.command()
@click.option(
    "--project",
    "project",
    required=True,
    metavar="PATH",
    type=click.Path(exists=True, file_okay=False),
    help="The project repository whose HEAD the memories are compared with.",
)
@click.option(
    "--flag", is_flag=True, help="Mark the reported memories for verification (one commit)."
)
@click.option("--verbose", "-v", is_flag=True, help="List each memory and what changed.")
@json_option
@pass_state
def check(state: State, project: str, flag: bool, verbose: bool) -> None:
    """Report memories whose project files changed since they were written.

    A memory names project files in its front-matter (anchors: [src/app.py])
    and in its body as inline code (`src/app.py`). A named file that was
    deleted, renamed or changed between the memory's updated_at and the
    project's HEAD makes the memory need verification. With --flag, those
    memories get verify: true and a verify_reason, in one commit.

    Exits 0 whatever it finds, so git hooks can run it after every merge,
    checkout and commit.

    \b
    Examples:
      gitmem check --project .
      gitmem check --project ~/src/my-api --flag
      gitmem check --project . --json
    """
    report = check_project(state.store(), project, flag=flag)
    if state.json:
        emit_json(report.to_dict())
        return
    click.echo(report.summary())
    if verbose:
        for memory in report.memories:
            label = "flagged earlier" if memory.already_flagged else "needs verification"
            click.echo(f"  {memory.id} ({memory.title or 'untitled'}): {label}")
            if memory.already_flagged and memory.reason:
                click.echo(f"    {memory.reason}")
            for finding in memory.findings:
                click.echo(f"    {finding.describe()} [{finding.source}]")
