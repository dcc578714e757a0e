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
    """Check the store's health; say how to fix each problem.

    Checks: git fsck, stale git locks, files a dead writer left, the work tree
    against the branch, the index against git, merge driver and hooks
    registration, unreadable memory files, dangling supersedes/related links,
    version-chain cycles and forks, stored credentials, permissions. Each
    finding comes with the command that fixes it; --fix applies the safe ones
    and never changes a memory. --deep compares every index row with git.

    Exit status: 0 when no error or warning remains, 1 otherwise.

    \b
    Examples:
      gitmem doctor
      gitmem doctor --fix
      gitmem doctor --check index --check locks --json
      gitmem doctor --deep
    """
    # The bar's units: one per memory for each check that reads them all (a few thousand
    # units is a few hundred memories, where the checks start to take a moment). Counting
    # them costs a walk of the memory folders: only for a terminal that shows the bar.
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
    """Look for credentials: in files, in staged files, or in the store's memories.

    With PATHs: those files (directories: every file below, .git skipped).
    With --staged: the files staged in the repository here. With --history:
    every file and commit message in the store's history (gitmem purge removes
    them). Otherwise: every memory, under the store's policy (secrets: in
    gitmem.yaml). Each finding is 'path:line: kind: excerpt', the secret masked.

    Exit status: 0 when nothing is found, 1 when something is.

    \b
    Examples:
      gitmem secrets
      gitmem secrets notes/ ~/.config/tool/config.yaml
      gitmem secrets --staged --json
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
