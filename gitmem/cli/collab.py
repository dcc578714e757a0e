"""Collaboration commands: remote, sync, conflicts, resolve, review, blame, diff, undo."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import click

from gitmem.base.clock import format_timestamp
from gitmem.base.errors import EXIT_CODES, InvalidInputError
from gitmem.cli.common import (
    ProgressBar,
    State,
    SuggestingGroup,
    authored,
    emitted,
    json_state,
    on_terminal,
    output,
    pass_state,
    scope_option,
    short,
    store_location,
    table,
    to_stderr,
)
from gitmem.entry import ci as ciing
from gitmem.features import audit as auditing
from gitmem.features import review as reviewing
from gitmem.format.memfile import rendered_text
from gitmem.format.model import UNTITLED
from gitmem.store import follow, mergedriver
from gitmem.store import sync as syncing

if TYPE_CHECKING:
    from gitmem.features.update_branch import UpdateResult
    from gitmem.store.branchmerge import TreeMerge


@click.command(name="merge-driver", hidden=True)
@click.argument("base", metavar="%O")
@click.argument("ours", metavar="%A")
@click.argument("theirs", metavar="%B")
@click.argument("path", metavar="%P")
@click.pass_context
def merge_driver(ctx: click.Context, base: str, ours: str, theirs: str, path: str) -> None:
    """git's merge driver for memory files: the merge of %O, %A and %B into %A.

    \b
    Example (in .git/config, as gitmem init writes it):
      driver = python -P -m gitmem merge-driver %O %A %B %P
    """
    ctx.exit(mergedriver.run_driver(base, ours, theirs, path, cwd=Path.cwd()))


@click.group(cls=SuggestingGroup)
def remote() -> None:
    """The store's git remotes (plain git remotes: git remote works too).

    \b
    Example:
      gitmem remote add origin git@github.com:me/memory.git
    """


@remote.command(name="add")
@click.argument("name")
@click.argument("url")
@json_state
def remote_add(state: State, name: str, url: str) -> None:
    """Add a remote to sync with."""
    syncing.add_remote(state.store(write=True).db(), name, url)
    output(state, {"name": name, "url": url}, f"Added remote {name} -> {url}")


@remote.command(name="list")
@json_state
def remote_list(state: State) -> None:
    """List the store's remotes."""
    rows = syncing.remotes(state.store().db())
    if not emitted(state, [{"name": n, "url": u} for n, u in rows]) and rows:
        click.echo(table(["NAME", "URL"], rows))


@click.command()
@click.argument("remote_name", metavar="[REMOTE]", default="origin")
@click.option("--branch", "-b", metavar="B", help="The remote branch (default: the store's).")
@scope_option
@json_state
def sync(state: State, remote_name: str, branch: str | None, scope: str | None) -> None:
    """Fetch, merge memory-aware (a clash kept as a fork: gitmem conflicts), and push.

    \b
    Example:
      gitmem sync backup --branch main
    """
    with ProgressBar("indexing", quiet=state.json, min_total=2000) as progress:
        result = state.store().sync(
            remote_name, branch=branch, scope=scope, progress=progress,
            git_progress=to_stderr if on_terminal(state.json) else None,
        )
    if emitted(state, result):
        return
    for done in (result, *result.others):
        upstream = f"{done.remote}/{done.branch}"
        if done.merge == "none":
            head = f"nothing new from {upstream}"
        else:
            what = "fast-forwarded to" if done.merge == "fast-forward" else "merged"
            head = (
                f"{what} {upstream}: {done.fetched} commit(s) fetched, "
                f"{len(done.added)} added, {len(done.changed)} changed, "
                f"{len(done.deleted)} deleted"
            )
        click.echo(f"{head}; " + ("pushed" if done.pushed else "nothing to push"))
        _merge_notes(done)
    for memory_id in result.pending_committed:
        click.echo(f"committed fork {memory_id} left by a git merge")


def _merge_notes(result: syncing.SyncResult | UpdateResult | TreeMerge) -> None:
    """What a memory-aware merge (sync, update-branch) kept both sides of or decided."""
    for fork in result.forks:
        click.echo(f"fork: {fork.of} was changed on both sides; the other version is {fork.id}")
    for memory_id, name in result.decided:
        click.echo(
            f"decided by time: both sides changed {name} of {memory_id}; the later value is "
            "kept and the other is listed by gitmem conflicts until you resolve it"
        )
    for memory_id in result.kept_over_delete:
        click.echo(f"kept: {memory_id} was deleted on one side and changed on the other")


@click.command("update-branch")
@click.argument("base")
@click.option(
    "--head", metavar="BRANCH",
    help="The branch to update (default: the one checked out). With a detached HEAD, as CI "
    "checks out, HEAD is attached to BRANCH first.",
)
@click.option(
    "--if-conflicting", is_flag=True,
    help="Merge only when plain git (a host's merge button) cannot merge BASE in.",
)
@json_state
def update_branch(state: State, base: str, head: str | None, if_conflicting: bool) -> None:
    """Merge BASE into this branch with gitmem's merge, as one merge commit (not pushed).

    \b
    Example:
      git fetch origin main && gitmem --store . update-branch origin/main && git push
    """
    from gitmem.features import update_branch as updating

    # The path, not the opened store: a detached HEAD (CI) has no branch to open it on yet.
    reason, path = store_location(state.store_path)
    if reason == "user":
        # the user store is never the clone checked out for a pull request
        raise click.UsageError(
            "name the clone of the store to update: gitmem --store . update-branch BASE"
        )
    if reason == "project":
        path = state.store().path
    result = updating.update_branch(
        path, base, head=head or state.branch, if_conflicting=if_conflicting
    )
    if emitted(state, result):
        return
    if result.outcome == "up-to-date":
        click.echo(f"already up to date: {base} is merged into {result.branch}; nothing to do")
        return
    if result.outcome == "clean":
        click.echo(f"{result.branch} merges {base} cleanly under plain git; nothing to do")
        return
    if result.attached:
        click.echo(f"HEAD was detached at {short(result.before)}: it now names {result.branch}")
    if result.outcome == "fast-forward":
        click.echo(f"fast-forwarded {result.branch} to {base} ({short(result.commit)})")
    else:
        click.echo(
            f"merged {base} into {result.branch} in {short(result.commit)}: "
            f"{len(result.merged)} memories changed on both sides, {len(result.forks)} forked"
        )
    for path_ in result.conflicting:
        click.echo(f"plain git conflicted on: {path_}")
    _merge_notes(result)
    click.echo(f"next: git push origin {result.branch} (never --force)")


@click.command()
@json_state
def conflicts(state: State) -> None:
    """List what merges kept both sides of: forks and double supersedes.

    \b
    Example:
      gitmem conflicts --json | jq '.[].fork'
    """
    from gitmem.features import conflicts as forks

    found = forks.conflicts(state.store())
    if emitted(state, found):
        return
    if not found:
        click.echo("No unresolved forks.")
        return
    click.echo(
        table(
            ["KIND", "FORK", "OF", "KEPT", "TITLE"],
            (
                [c.kind, c.fork.id, c.of, c.kept.id if c.kept else "(deleted)",
                 c.fork.title or UNTITLED]
                for c in found
            ),
        )
    )


EDIT_NOTE = (
    "<!-- gitmem resolve: the other version ({fork}) follows. Edit the body into one "
    "and delete this line. -->\n"
)


@click.command()
@click.argument("memory_id", metavar="ID")
@click.option(
    "--keep", type=click.Choice(["ours", "theirs", "both"]),
    help="ours: the memory at the path stays, the fork goes; theirs: the fork's content "
    "takes the path; both: keep both as separate memories.",
)
@click.option("--edit", is_flag=True, help="Merge the two by hand in $EDITOR.")
@authored
def resolve(
    state: State, memory_id: str, keep: str | None, edit: bool, agent: str | None,
    message: str | None,
) -> None:
    """Settle one fork (ID: the fork's or its memory's) in one commit.

    \b
    Example:
      gitmem resolve mem_5f0c... --keep theirs
    """
    from gitmem.features import conflicts as forks

    if (keep is None) == (not edit):
        raise click.UsageError("give one of --keep ours|theirs|both or --edit")
    store = state.store()
    text: str | None = None
    if edit:
        conflict = forks.find_conflict(store, memory_id)
        if conflict.kept is None:
            raise click.UsageError(f"{conflict.of} was deleted since; use --keep both")
        separator = "" if conflict.kept.body.endswith("\n") else "\n"
        note = EDIT_NOTE.format(fork=conflict.fork.id)
        text = click.edit(
            rendered_text(conflict.kept) + separator + note + conflict.fork.body,
            extension=".md", require_save=True,
        )
        if text is None:
            raise click.UsageError("the editor saved nothing; nothing was resolved")
        memory_id = conflict.fork.id
    kept = keep or "edit"
    result = forks.resolve(store, memory_id, kept, text=text, agent=agent, message=message)
    output(
        state, {"fork": result.fork.id, "of": result.of, "keep": kept},
        f"Resolved {result.of} (fork {result.fork.id}): kept {keep or 'an edit'}",
    )


@click.command()
@click.argument("spec", metavar="BASE..HEAD")
@click.option(
    "--format", "fmt", type=click.Choice(list(reviewing.FORMATS)), default="markdown",
    show_default=True, help="markdown (a pull-request comment), text, or json.",
)
@click.option("--strict", is_flag=True, help="Exit 8 when the review finds problems (for CI).")
@click.option(
    "--max-chars", type=int, default=None,
    help="Cut the markdown to fit a comment of this many characters "
    f"(GitHub: {reviewing.COMMENT_LIMIT}); problems first, then what fits, then a count.",
)
@click.option(
    "--full-report", type=click.Path(dir_okay=False, writable=True, path_type=Path), default=None,
    help="Also write the whole, uncut report to this file (the CI job's artifact).",
)
@click.option(
    "--full", is_flag=True, help=f"Whole body diffs (default: {reviewing.DIFF_LIMIT} lines)."
)
@click.option(
    "--project", type=click.Path(file_okay=False, path_type=Path),
    help="A project repository: report anchors to files missing at its HEAD.",
)
@json_state
def review(
    state: State, spec: str, fmt: str, strict: bool, max_chars: int | None,
    full_report: Path | None, full: bool, project: Path | None,
) -> None:
    """Review the memory changes of a commit range (for pull requests and CI).

    \b
    Example:
      gitmem review origin/main...HEAD --strict --max-chars 65536 > comment.md
    """
    result = reviewing.review(state.store(), spec, full=full, project=project)
    fmt = "json" if state.json else fmt
    if full_report is not None:
        try:
            full_report.write_text(reviewing.render(result, fmt), encoding="utf-8")
        except OSError as exc:
            raise InvalidInputError(f"cannot write {full_report}: {exc.strerror}") from None
    click.echo(reviewing.render(result, fmt, max_chars=max_chars), nl=False)
    if strict and result.problems:
        click.echo(f"gitmem: review found {len(result.problems)} problem(s)", err=True)
        raise click.exceptions.Exit(EXIT_CODES["review-problems"])


@click.command()
@click.argument("memory_id", metavar="ID")
@json_state
def blame(state: State, memory_id: str) -> None:
    """Which commit, agent and session wrote each line of a memory's body.

    \b
    Example:
      gitmem blame mem_5f0c...
    """
    store = state.store()
    lines = auditing.blame(store, store.resolve_id(memory_id))  # a unique id prefix will do
    if emitted(state, lines):
        return
    rows = (
        [short(o.commit), o.agent or o.author, o.session or "-", format_timestamp(o.time),
         f"{line.number:>3} {line.text}"]
        for line in lines
        for o in [line.origin]
    )
    click.echo(table(["COMMIT", "BY", "SESSION", "TIME", "LINE"], rows))


@click.command(name="diff")
@click.argument("args", nargs=-1, required=True, metavar="REV1 [REV2] [ID]")
@json_state
def diff(state: State, args: tuple[str, ...]) -> None:
    """Memory-aware diff between two revisions (REV2: the tip), fields by name.

    With ID, only that memory; a second argument is REV2 if it names a revision.

    \b
    Example:
      gitmem diff 2026-11-01 mem_5f0c...
    """
    if len(args) > 3:
        raise click.UsageError("give REV1 [REV2] [ID]")
    store = state.store()
    rev1, rest = args[0], list(args[1:])
    has_rev2 = len(rest) == 2 or (rest and auditing.is_revision(store, rest[0]))
    rev2 = rest.pop(0) if has_rev2 else None
    memory_id = store.resolve_id(rest[0]) if rest else None  # a unique id prefix will do
    entries = auditing.diff(store, rev1, rev2, memory_id)
    if emitted(state, entries):
        return
    for entry in entries:
        click.echo(f"{entry.status} {entry.id}")
        for change in entry.fields:
            click.echo(f"  {change.name}: {_shown(change.before)} -> {_shown(change.after)}")
        for line in entry.diff:
            click.echo(f"  {line}")


def _shown(value: object) -> str:
    return "-" if value is None else json.dumps(value, ensure_ascii=False)


@click.command()
@click.option("--session", metavar="S", help="Undo every write of this agent session.")
@click.option("--commit", "commit_id", metavar="C", help="Undo this one commit.")
@authored
def undo(
    state: State, session: str | None, commit_id: str | None, agent: str | None,
    message: str | None,
) -> None:
    """Revert every write of an agent session, or one commit, in one new commit.

    \b
    Example:
      gitmem undo --session 9b1f...
    """
    if (session is None) == (commit_id is None):
        raise click.UsageError("give one of --session S or --commit C")
    result = auditing.undo(
        state.store(), session=session, commit=commit_id, agent=agent, message=message
    )
    output(
        state, result,
        f"Undid {len(result.undone)} commit(s) in {short(result.commit or '-')}: "
        f"{len(result.reverted)} reverted, {len(result.restored)} restored, "
        f"{len(result.removed)} removed",
    )


@click.group(cls=SuggestingGroup)
def ci() -> None:
    """CI recipes that review memory changes on every pull request.

    \b
    Example:
      gitmem ci init --host github
    """


@ci.command("init")
@click.option(
    "--host", type=click.Choice(sorted(ciing.HOSTS)), required=True,
    help="github: a GitHub Actions workflow; gitlab: a GitLab CI job.",
)
@click.option(
    "--dir", "directory", type=click.Path(file_okay=False, path_type=Path), default=None,
    help="The repository to write into (default: the store's work tree).",
)
@click.option("--force", is_flag=True, help="Replace a recipe that is already there.")
@click.option(
    "--update-branch", is_flag=True,
    help="Also a job that merges the base into a pull request's branch with gitmem "
    "update-branch when plain git cannot, and pushes it.",
)
@pass_state
def ci_init(
    state: State, host: str, directory: Path | None, force: bool, update_branch: bool,
) -> None:
    """Write a CI recipe that runs `gitmem review --strict` on each pull request:
    the review as one comment, the whole report as an artifact, failing on problems."""
    root = directory if directory is not None else state.store().path
    written = ciing.write_recipe(root, host, force=force, update_branch=update_branch)
    for path in written.unchanged:
        click.echo(f"unchanged {path}")
    for path in written.files:
        click.echo(f"wrote {path}")
    if written.todo:
        click.echo(written.todo)
    click.echo("next: review it, then git add and commit it in that repository")


@click.command("clone")
@click.argument("url")
@click.argument("directory", required=False, type=click.Path(path_type=Path))
@click.option("--bare", is_flag=True, help="A clone without a work tree (agents, servers).")
@click.option("--branch", help="The hub's branch that holds the store (default: main).")
@click.option("--no-hooks", is_flag=True, help="Do not install the store's git hooks.")
@json_state
def clone(
    state: State, url: str, directory: Path | None, bare: bool, branch: str | None, no_hooks: bool,
) -> None:
    """Clone a team's store and make it ready: branch, merge driver, hooks, index.

    \b
    Example:
      gitmem clone git@github.com:acme/team-memory.git
    """
    from gitmem.entry import team

    with ProgressBar("indexing", quiet=state.json, min_total=2000) as progress:
        result = team.clone(
            url, directory, bare=bare, branch=branch, hooks=not no_hooks, progress=progress
        )
    output(
        state, result,
        f"cloned {url} into {result.path} ({result.memories} memories on {result.branch}; "
        "merge driver registered" + (", hooks installed" if result.hooks else "") + ")",
    )


@click.command("join")
@click.argument("url")
@click.option("--remote", default="origin", show_default=True, help="The remote's name.")
@json_state
def join(state: State, url: str, remote: str) -> None:
    """Merge a team's store into this one (its gitmem.yaml wins) and push; then gitmem sync.

    \b
    Example:
      gitmem join git@github.com:acme/team-memory.git
    """
    from gitmem.entry import team

    result = team.join(state.store(), url, remote=remote)
    output(
        state, result,
        f"joined {url} as {remote}: {result.fetched} commit(s) of the team's merged in, "
        f"{len(result.added)} memories added here; "
        + ("pushed" if result.pushed else "nothing to push"),
    )


@click.group(cls=SuggestingGroup, invoke_without_command=True)
@json_state
def branches(state: State) -> None:
    """Memory branches that follow the code's branches (gitmem config branches.follow
    true), with their code branch's state (open, merged, gone) and memory count.

    \b
    Example:
      gitmem branches land feat/payments
    """
    if click.get_current_context().invoked_subcommand is None:
        found = follow.branches(state.store().db(), Path.cwd())
        rows = [(b.name, b.state, str(b.memories)) for b in found]
        if not emitted(state, found) and rows:
            click.echo(table(["BRANCH", "CODE", "MEMORIES"], rows))


@branches.command(name="land")
@click.argument("name")
@json_state
def branches_land(state: State, name: str) -> None:
    """Merge memory branch NAME into main, then delete it (after a squash or rebase merge,
    which the post-merge hook cannot see)."""
    kind, tm = follow.land(state.store(write=True).db().path, name)
    data = {"branch": name, "merge": kind, "forks": tm.forks}
    if not emitted(state, data):
        click.echo(f"landed {name} on main ({kind})")
        _merge_notes(tm)


@branches.command(name="prune")
@click.option("--apply", is_flag=True, help="Delete them (default: only show them).")
@json_state
def branches_prune(state: State, apply: bool) -> None:
    """Show, and with --apply delete, the memory branches whose code branch is gone
    without merging (local and remote)."""
    gone = follow.prune(state.store(write=apply).db(), Path.cwd(), apply=apply)
    if not emitted(state, {"applied": apply, "branches": gone}):
        verb = "deleted" if apply else "would delete (--apply does)"
        for b in gone:
            click.echo(f"{verb} {b.name}: {b.memories} memories")
