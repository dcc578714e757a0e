"""``gitmem doctor [--fix]`` and ``gitmem secrets [PATH...]``: health checks, credential scans."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click

from gitmem.base.printable import printable
from gitmem.cli.common import ProgressBar, State, emitted, json_state, on_terminal, scope_option
from gitmem.entry import doctor as _doctor
from gitmem.entry import secretscan

_MARK = {"error": "ERROR", "warning": "warn ", "info": "info "}


@click.command()
@click.option("--fix", is_flag=True, help="Apply the safe fixes (they never change a memory).")
@click.option(
    "--check", "checks", multiple=True, type=click.Choice(_doctor.CHECKS),
    help="Run only this check; repeat for more (default: all).",
)
@scope_option
@click.option(
    "--deep", is_flag=True,
    help="Decode every memory from git and compare each with the index (slow on large stores).",
)
@json_state
def doctor(state: State, fix: bool, checks: tuple[str, ...], scope: str | None, deep: bool) -> None:
    """Check the store's health, saying how to fix each problem (exit 1: some remain).

    \b
    Example:
      gitmem doctor --check index --fix
    """
    with ProgressBar("checking", quiet=state.json, min_total=5000) as progress:
        report = _doctor.diagnose(
            state.store(), fix=fix, checks=checks or None, scope=scope, deep=deep,
            progress=progress if on_terminal(state.json) else None,
        )
    if not emitted(state, report):
        for finding in report.findings:
            done = " (fixed)" if finding.fixed else ""
            # A finding may name a teammate's file: its name is shown escaped.
            line = f"{_MARK[finding.severity]} {finding.check}: {finding.message}{done}"
            click.echo(printable(line))
            if finding.fix and not finding.fixed:
                safe = "  [doctor --fix does this]" if finding.safe else ""
                click.echo(printable(f"       fix: {finding.fix}{safe}"))
            if finding.fix_error:
                click.echo(printable(f"       the fix failed: {finding.fix_error}"))
        fixed = sum(1 for f in report.findings if f.fixed)
        remaining = len(report.remaining)
        summary = "healthy" if report.healthy else f"{remaining} problem(s) remain"
        if fixed:
            summary += f"; {fixed} fixed"
        click.echo(f"{', '.join(report.stores)}: {summary}")
    if not report.healthy:
        raise click.exceptions.Exit(1)


@click.command()
@click.argument("paths", nargs=-1, type=click.Path())
@click.option(
    "--staged", is_flag=True, help="Scan the files staged in the git repository here (its index)."
)
@click.option(
    "--history", is_flag=True,
    help="Scan the store's whole history: every file any commit held, and every commit "
    "message (each finding names the commit that introduced it).",
)
@json_state
def secrets(state: State, paths: tuple[str, ...], staged: bool, history: bool) -> None:
    """Look for credentials in the store, PATHs, staged files or history (exit 1: found).

    \b
    Example:
      gitmem secrets --history
    """
    if sum([staged, bool(paths), history]) > 1:
        raise click.UsageError("give one of PATHs, --staged or --history")
    found: Sequence[Any]
    if history:
        found = secretscan.scan_history(state.store())
    elif staged:
        found = secretscan.scan_staged(".")
    elif paths:
        found = secretscan.scan_paths(paths)
    else:
        found = secretscan.scan_store(state.store())
    if not emitted(state, list(found)):
        for item in found:
            click.echo(item.line())
        if not found:
            click.echo("No credentials found in history." if history else "No credentials found.")
    if found:
        raise click.exceptions.Exit(1)
