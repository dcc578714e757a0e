"""``gitmem demo``: the README's main job, a narrated tour on a real store."""

from __future__ import annotations

import os
import shlex
import shutil
import sys
from pathlib import Path

import click

from gitmem import Store
from gitmem.cli.common import State, pass_state, table
from gitmem.cli.store import history_text, log_text
from gitmem.format.memfile import rendered_text
from gitmem.format.model import UNTITLED
from gitmem.git.command import run_git

AGENT = "demo-agent"
GIT_LOG_FORMAT = (
    "%h %an: %s%n%(trailers:key=Gitmem-Op,key=Gitmem-Id,key=Gitmem-Supersedes,"
    "key=Gitmem-Prune,key=Gitmem-Agent)"
)


def _step(number: int, text: str) -> None:
    click.echo()
    click.secho(f"{number}. {text}", bold=True)


def _indented(text: str) -> None:
    for line in text.rstrip("\n").splitlines():
        click.echo(f"   {line}" if line else "")


def _git_log(store: Store, count: int) -> None:
    """The store's real ``git log`` for the demo's commits; Store.log when git is missing."""
    path = store.path
    if shutil.which("git") is not None:
        shown = f"git -C {path} log -n{count} --format='{GIT_LOG_FORMAT}'"
        result = run_git(
            ["log", f"-n{count}", f"--format={GIT_LOG_FORMAT}"], gitdir=store.db().gitdir,
            check=False,
        )
        if result.returncode == 0:
            click.echo(f"   $ {shown}")
            # Trailer lines indented under their subject line, for the eye.
            _indented(result.stdout.decode("utf-8", "replace").replace("\nGitmem-", "\n  Gitmem-"))
            return
    click.echo("   (git is not installed here; the same commits as gitmem reads them)")
    _indented(log_text(store.log(limit=count)))


REVIEWS = "projects/demo/review_history"


def _layered_step(store: Store) -> int:
    """Append a review to a layered document; the 11th and later reviews push the oldest
    into review_history_archive.md in the same commit. Returns the commits it made."""
    from gitmem.features.layered import LayeredStore

    layered = LayeredStore(store, agent=AGENT)
    review = "\n\n- checked `src/app.py`: fine\n"
    made = 1
    if layered.get(REVIEWS) is None:
        reviews = "".join(f"## Review 2026-01-{day:02d}{review}\n" for day in range(1, 11))
        layered.create(
            {"layer": "shared-project", "project": "demo", "fileType": "review_history",
             "content": "# Review history\n\n" + reviews}
        )
        click.echo(f"   created {REVIEWS} with 10 reviews (the limit)")
        made += 1
    result = layered.append(REVIEWS, f"## Review {store.clock.now().date().isoformat()}{review}")
    click.echo(f"   appended a review: {result.line_count} lines; in the same commit:")
    for item in result.prune_details:
        click.echo(f"   {item.action}: {item.section} ({item.reason})")
    return made


def program() -> str:
    """How to run gitmem again the way it was just run (``.venv/bin/gitmem``, when
    ``gitmem`` is not on PATH), for hints that work as printed."""
    argv0 = sys.argv[0] if sys.argv else ""
    ran = Path(argv0)
    if ran.name == "__main__.py":
        return f"{shlex.quote(sys.executable)} -m gitmem"
    if ran.name != "gitmem" or os.sep not in argv0:
        return "gitmem"  # found on PATH (or run in-process, as by tests)
    found = shutil.which("gitmem")
    if found is not None and ran.exists() and ran.samefile(found):
        return "gitmem"
    return shlex.quote(argv0)


@click.command()
@pass_state
def demo(state: State) -> None:
    """A narrated tour on the store gitmem uses here (point it at a scratch store).

    \b
    Example:
      GITMEM_HOME=./demo-store gitmem demo
    """
    store = state.store(write=True)
    path = store.path
    click.secho("gitmem demo", bold=True)
    click.echo(f"Store: {path} -- a git repository of markdown files; every write below is one "
               "commit.")

    _step(1, "An agent remembers three things (gitmem add):")
    made = [
        store.create(body, title=title, category=category, tags=[*tags, "demo"], agent=AGENT,
                     trigger="manual")
        for body, title, category, tags in (
            ("Fixtures live in tests/conftest.py (sample_user, mock_db).\n",
             "Prefer pytest fixtures over setUp", "coding-preferences", ["testing", "python"]),
            ("Release branches are named release/X.Y.\n", "Release branch naming",
             "project-conventions", ["git"]),
            ("The user prefers short answers with a code example first.\n",
             "Short answers, code first", "user-facts", []),
        )
    ]
    fixtures, branches, _answers = made
    for memory in made:
        click.echo(f"   {memory.id}  {memory.title}")

    _step(2, "It learns more and updates one in place (gitmem update): same id, version 1 -> 2")
    fixtures = store.update(
        fixtures.id, "Fixtures live in tests/conftest.py (sample_user, mock_db);\n"
        "files go in tmp_path, never in the source tree.\n", agent=AGENT,
        message="learned in review: tests must not write into the repository",
    )
    click.echo(f"   {fixtures.id} is now version {fixtures.version}; the file (gitmem show):")
    _indented(rendered_text(store.read(fixtures.id)))

    _step(3, "A convention changed, so a new memory supersedes the old one (gitmem supersede):")
    renamed = store.supersede(
        branches.id, "Release branches are named release/vX.Y (with a v) since the 2.0 release.\n",
        agent=AGENT,
    )
    click.echo(f"   {renamed.id} supersedes {branches.id}, version {renamed.version};")
    click.echo("   the old file is not touched, and it drops out of the listing.")

    _step(4, "What the store remembers now (gitmem ls --tag demo):")
    listed = store.list(tags=["demo"])
    rows = ([m.id, str(m.version), m.category or "-", m.title or UNTITLED] for m in listed)
    _indented(table(["ID", "VER", "CATEGORY", "TITLE"], rows))

    _step(5, f"The history of {renamed.id}, back through what it superseded (gitmem history):")
    _indented(history_text(store.history(renamed.id)))

    _step(6, "A layered Forge document: a review history that prunes itself (gitmem layer):")
    writes = 5 + _layered_step(store)

    _step(7, "Every write was a git commit with trailers; this is git's own log:")
    _git_log(store, writes)

    click.echo()
    click.echo("Next: look around with")
    me, where = program(), shlex.quote(str(path))
    click.echo(f"   {me} --store {where} ls --all")
    click.echo(f"   {me} --store {where} history {fixtures.id[:12]}")
    click.echo(f"   {me} --store {where} status")
    click.echo(f"   git -C {where} log -p")
