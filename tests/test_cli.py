"""Every command of the command line through click's CliRunner, against real stores."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from clitools import Editor, Gitmem, make_runner, one_line_error
from conftest import GitRunner

import gitmem
from gitmem import FixedClock, Store
from gitmem.base.clock import format_timestamp
from gitmem.cli import cli
from gitmem.format.layout import memory_path

UUID_ID = re.compile(r"mem_[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")


@pytest.fixture
def gm(store: Store) -> Gitmem:
    """``gitmem --store <the store fixture>``."""
    return Gitmem(store.path, make_runner())


@pytest.fixture
def bare_gm(bare_store: Store) -> Gitmem:
    return Gitmem(bare_store.path, make_runner())


@pytest.fixture
def editor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Editor:
    return Editor(tmp_path / "editor", monkeypatch)


def commits(git: GitRunner, store: Store) -> int:
    return int(git(store.db().gitdir, "rev-list", "--count", "main").strip())


def add(gm: Gitmem, body: str = "a body\n", *args: str) -> str:
    out = gm("add", body, *args).stdout
    memory_id = out.strip()
    assert out == memory_id + "\n"
    return memory_id


# -- init ------------------------------------------------------------------------------------------


def test_init_creates_a_work_tree_store(tmp_path: Path, git: GitRunner) -> None:
    gm = Gitmem(None, make_runner())
    target = tmp_path / "notes"
    out = gm("init", str(target)).stdout
    assert out == f"Initialized repo-scope work-tree gitmem store in {target}\n"
    assert (target / ".git").is_dir()
    assert (target / "gitmem.yaml").is_file()
    assert git(target, "log", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip() == "init"
    again = gm("init", str(target)).stdout
    assert again.startswith("Opened existing repo-scope work-tree gitmem store")
    assert git(target, "rev-list", "--count", "main").strip() == "1"


def test_init_bare_json(tmp_path: Path) -> None:
    gm = Gitmem(None, make_runner())
    data = json.loads(gm("init", str(tmp_path / "b.git"), "--bare", "--json").stdout)
    assert data == {
        "path": str(tmp_path / "b.git"),
        "gitdir": str(tmp_path / "b.git"),
        "bare": True,
        "scope": "repo",
        "created": True,
    }
    assert (tmp_path / "b.git" / "HEAD").is_file()
    assert json.loads(gm("--json", "init", str(tmp_path / "b.git")).stdout)["created"] is False


def test_init_without_path_makes_the_user_store(isolated_home: Path) -> None:
    gm = Gitmem(None, make_runner())
    data = json.loads(gm("init", "--json").stdout)
    assert data["path"] == str(isolated_home / ".gitmem")
    assert data["scope"] == "user"


def test_init_refuses_a_non_empty_directory(tmp_path: Path) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "file.txt").write_text("x")
    line = Gitmem(None, make_runner()).fails(7, "init", str(tmp_path / "full"))
    assert "not empty" in line


def test_init_project_bare_is_a_usage_error(tmp_path: Path) -> None:
    line = Gitmem(None, make_runner()).fails(2, "init", "--project", "--bare", str(tmp_path))
    assert "--project" in line
    assert "hint: see 'gitmem init --help'" in line


def test_init_project_in_a_real_project(
    tmp_path: Path, git: GitRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    project = tmp_path / "project"
    (project / "src" / "deep").mkdir(parents=True)
    git(tmp_path, "init", "-q", str(project))
    monkeypatch.chdir(project / "src")  # init --project from a subdirectory finds the top
    gm = Gitmem(None, make_runner())
    out = gm("init", "--project").stdout
    assert str(project / ".gitmem") in out
    exclude = (project / ".git" / "info" / "exclude").read_text()
    assert "/.gitmem/" in exclude.splitlines()
    assert git(project, "status", "--porcelain") == ""  # the store is not seen by the project

    monkeypatch.chdir(project / "src" / "deep")  # gitmem walks up to .gitmem/ as git does
    memory_id = add(gm, "project fact\n", "--title", "In the project")
    listed = gm.json("ls")
    assert [m["id"] for m in listed] == [memory_id]
    assert listed[0]["store_scope"] == "repo"
    assert gitmem.open(project / ".gitmem").read(memory_id).title == "In the project"
    # running it twice changes nothing
    gm("init", "--project", str(project))
    assert (project / ".git" / "info" / "exclude").read_text() == exclude


def test_init_project_outside_a_git_repository(tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    line = Gitmem(None, make_runner()).fails(7, "init", "--project", str(plain))
    assert "not the top of a git repository" in line


# -- add -------------------------------------------------------------------------------------------


def test_add_prints_the_new_id_and_stores_every_field(
    gm: Gitmem, store: Store, git: GitRunner
) -> None:
    other = add(gm, "older\n")
    memory_id = add(
        gm,
        "Fixtures live in tests/conftest.py.\n",
        "--title",
        "Prefer pytest fixtures",
        "--category",
        "coding-preferences",
        "--tag",
        "testing",
        "--tag",
        "python",
        "--scope",
        "repo",
        "--agent",
        "hephaestus",
        "--session",
        "9b1f",
        "--trigger",
        "cadence",
        "--related",
        f"{other}:refines",
        "--related",
        "mem_elsewhere",
        "-m",
        "learned in review",
    )
    assert UUID_ID.fullmatch(memory_id)
    m = store.read(memory_id)
    assert m.body == "Fixtures live in tests/conftest.py.\n"
    assert m.title == "Prefer pytest fixtures"
    assert m.category == "coding-preferences"
    assert m.tags == ("testing", "python")
    assert m.agent == "hephaestus"
    assert m.session_id == "9b1f"
    assert str(m.trigger) == "cadence"
    assert [(r.id, str(r.relationship)) for r in m.related] == [
        (other, "refines"),
        ("mem_elsewhere", "relates-to"),
    ]
    message = git(store.path, "log", "-1", "--format=%an%n%B")
    assert message.startswith("hephaestus\ncreate: Prefer pytest fixtures\n\nlearned in review\n")
    assert f"Gitmem-Id: {memory_id}" in message


def test_add_with_an_id_and_a_duplicate(gm: Gitmem) -> None:
    assert add(gm, "x", "--id", "my-note") == "my-note"
    line = gm.fails(5, "add", "again", "--id", "my-note")
    assert line == "gitmem: error: a memory with id my-note already exists"


@pytest.mark.parametrize("bad", ["../etc", "a/b", "%2e%2e", "/abs"])
def test_add_refuses_unsafe_ids(gm: Gitmem, store: Store, git: GitRunner, bad: str) -> None:
    before = commits(git, store)
    gm.fails(4, "add", "x", "--id", bad)
    assert commits(git, store) == before


def test_add_reads_stdin(gm: Gitmem, store: Store) -> None:
    body = "line one\r\nünïcode\n---\nnot front-matter\n"
    dash = gm("add", "-", input=body.encode()).stdout.strip()
    assert store.read(dash).body == body
    implicit = gm("add", "--title", "piped", input="from a pipe").stdout.strip()
    assert store.read(implicit).body == "from a pipe"


def test_add_refuses_bad_input(gm: Gitmem, store: Store, git: GitRunner) -> None:
    before = commits(git, store)
    assert "UTF-8" in gm.fails(4, "add", "-", input=b"\xff\xfe bad bytes")
    assert "no body" in gm.fails(2, "add", input="")
    assert "trigger 'often'" in gm.fails(4, "add", "x", "--trigger", "often")
    assert "relationship 'likes'" in gm.fails(4, "add", "x", "--related", "mem_a:likes")
    assert "scope" in gm.fails(4, "add", "x", "--scope", "everywhere")
    assert "one line" in gm.fails(4, "add", "x", "--title", "two\nlines")
    assert commits(git, store) == before


def test_add_json(gm: Gitmem, clock: FixedClock) -> None:
    data = gm.json("add", "body\n", "--title", "T", "--tag", "a")
    assert UUID_ID.fullmatch(data["id"])
    assert data["title"] == "T"
    assert data["tags"] == ["a"]
    assert data["version"] == 1
    assert data["body"] == "body\n"
    assert data["scope"] == "repo"
    assert data["path"] == memory_path(data["id"])
    assert set(data) >= {"created_at", "updated_at", "store_scope"}


# -- show ------------------------------------------------------------------------------------------


def test_show_prints_the_file_with_its_derived_values(
    gm: Gitmem, store: Store, git: GitRunner
) -> None:
    memory_id = add(gm, "body with\r\ncrlf and no final newline", "--title", "Shown")
    path = store.read(memory_id).path
    assert path is not None
    result = gm("show", memory_id)
    stored = git(store.path, "show", f"HEAD:{path}")
    assert "version" not in stored
    read = store.read(memory_id)
    line = f"created_at: {format_timestamp(read.created_at)}\n"
    derived = line + f"updated_at: {format_timestamp(read.updated_at)}\nversion: 1\n"
    assert result.stdout == stored.replace(line, derived)
    assert result.stdout_bytes.endswith(b"body with\r\ncrlf and no final newline")


def test_show_at_a_revision_and_a_date(gm: Gitmem, store: Store, clock: FixedClock) -> None:
    m = store.create("first\n", title="v1")
    clock.advance(hours=2)
    store.update(m.id, "second\n", title="v2")
    assert "second" in gm("show", m.id).stdout
    assert "first" in gm("show", m.id, "--at", "HEAD~1").stdout
    assert gm.json("show", m.id, "--at", "2026-11-22T11:00:00Z")["title"] == "v1"
    assert gm.json("show", m.id, "--at", "2026-11-22T12:00:00Z")["title"] == "v2"
    assert "no memory" in gm.fails(3, "show", m.id, "--at", "HEAD~2")


def test_show_json_is_to_dict(gm: Gitmem, store: Store) -> None:
    memory_id = add(gm, "x\n", "--title", "T", "--category", "patterns")
    assert gm.json("show", memory_id) == store.read(memory_id).to_dict()


def test_show_missing_is_not_found(gm: Gitmem) -> None:
    line = gm.fails(3, "show", "mem_missing")
    assert line == (
        "gitmem: error: no memory mem_missing (hint: gitmem ls --all lists current memories; "
        "gitmem log --op delete shows deleted ones)"
    )


# -- edit ------------------------------------------------------------------------------------------


def pending_edit(store: Store, memory_id: str) -> Path:
    return store.db().gitdir / "gitmem" / "edits" / f"{memory_id}.md"


def test_edit_commits_one_update(
    gm: Gitmem, store: Store, editor: Editor, git: GitRunner, clock: FixedClock
) -> None:
    m = store.create("old body\n", title="Old", tags=["keep"])
    clock.advance(minutes=5)
    before = commits(git, store)
    editor.will(
        "text = text.replace('title: Old', 'title: New  # renamed by hand')"
        ".replace('old body', 'new body').replace('version: 1', 'version: 99')"
        " + 'appended line\\n'\n"
        "text = text.replace('tags: [keep]', 'tags: [keep]\\nreviewed_by: alice')"
    )
    out = gm("edit", m.id, "-m", "fixing by hand").stdout
    assert out == f"Updated {m.id} to version 2\n"
    assert commits(git, store) == before + 1
    edited = store.read(m.id)
    assert edited.title == "New"
    assert edited.body == "new body\nappended line\n"
    assert edited.version == 2  # the store's, not the 99 typed
    assert edited.updated_at != m.updated_at  # the command line's store runs on the real clock
    assert edited.created_at == m.created_at
    assert edited.extra == {"reviewed_by": "alice"}
    text = (store.path / str(edited.path)).read_text()
    assert "title: New  # renamed by hand\n" in text
    assert text.index("reviewed_by") < text.index("created_at")
    subject = git(store.path, "log", "-1", "--format=%s%n%b")
    assert subject.startswith(
        f"update: New\nfixing by hand\n\nGitmem-Op: update\nGitmem-Id: {m.id}"
    )
    assert git(store.path, "status", "--porcelain") == ""


def test_edit_unchanged_makes_no_commit(
    gm: Gitmem, store: Store, editor: Editor, git: GitRunner
) -> None:
    m = store.create("body\n", title="Same")
    before = commits(git, store)
    assert gm("edit", m.id).stdout == f"No changes to {m.id} (version 1)\n"
    # store-managed: ignored
    editor.will("text = text.replace('created_at:', 'version: 5\\ncreated_at:')")
    gm("edit", m.id)
    assert commits(git, store) == before
    assert editor.seen == (store.path / str(m.path)).read_text()  # the file, as stored


def test_broken_edit_is_kept_and_resumed(
    gm: Gitmem, store: Store, editor: Editor, git: GitRunner
) -> None:
    m = store.create("body\n", title="Fragile")
    stored = (store.path / str(m.path)).read_bytes()
    before = commits(git, store)
    editor.will(
        "text = text.replace('title: Fragile', 'title: [unclosed') + 'my precious words\\n'"
    )
    line = gm.fails(4, "edit", m.id)
    assert "not valid YAML" in line
    assert "your edit is kept in" in line
    kept = pending_edit(store, m.id)
    assert "my precious words" in kept.read_text()
    assert commits(git, store) == before  # never half-applied
    assert (store.path / str(m.path)).read_bytes() == stored

    # Opening it again resumes from the kept text; still broken stays kept.
    editor.will("pass")
    result = gm("edit", m.id, code=4)
    assert "resuming your unfinished edit" in result.stderr
    assert "title: [unclosed" in editor.seen
    assert kept.exists()

    # Fixed: committed, and the kept edit is gone.
    editor.will("text = text.replace('title: [unclosed', 'title: Sturdy')")
    assert gm("edit", m.id).stdout == f"Updated {m.id} to version 2\n"
    assert not kept.exists()
    assert store.read(m.id).title == "Sturdy"
    assert "my precious words" in store.read(m.id).body
    assert commits(git, store) == before + 1


def test_edit_refuses_a_changed_id_and_schema_errors(
    gm: Gitmem, store: Store, editor: Editor, git: GitRunner
) -> None:
    m = store.create("body\n", title="T")
    before = commits(git, store)
    editor.will(f"text = text.replace('id: {m.id}', 'id: mem_other')")
    assert "the id cannot change" in gm.fails(4, "edit", m.id)
    editor.will("text = text.replace('scope: repo', 'scope: galaxy')")
    assert "scope: 'galaxy' is not one of" in gm.fails(4, "edit", m.id, "--discard")
    editor.will("text = text.replace('---\\n', '', 1)")
    assert "no front-matter" in gm.fails(4, "edit", m.id, "--discard")
    assert commits(git, store) == before
    editor.will("pass")
    assert gm("edit", m.id, "--discard").stdout == f"No changes to {m.id} (version 1)\n"
    assert editor.seen.startswith("---\n")  # the stored file again, not the kept edit
    assert not pending_edit(store, m.id).exists()
    assert commits(git, store) == before


def test_edit_conflict_when_someone_else_writes_meanwhile(
    gm: Gitmem, store: Store, editor: Editor
) -> None:
    m = store.create("body\n", title="Contended")
    editor.will(
        "import gitmem\n"
        f"gitmem.open({str(store.path)!r}).append({m.id!r}, 'written by someone else')\n"
        "text = text.replace('body', 'my body')"
    )
    line = gm.fails(6, "edit", m.id)
    assert "someone else changed it" in line
    assert pending_edit(store, m.id).exists()
    assert store.read(m.id).body == "body\nwritten by someone else"


def test_edit_when_the_editor_fails(gm: Gitmem, store: Store, editor: Editor) -> None:
    m = store.create("body\n")
    editor.will("fail = True")
    line = gm.fails(1, "edit", m.id)
    assert "Editing failed" in line
    assert store.read(m.id).version == 1


def test_edit_missing_memory(gm: Gitmem, editor: Editor) -> None:
    gm.fails(3, "edit", "mem_missing")


def test_edit_in_a_bare_store(bare_gm: Gitmem, bare_store: Store, editor: Editor) -> None:
    m = bare_store.create("body\n", title="Bare")
    editor.will("text = text.replace('title: Bare', 'title: Still bare')")
    data = bare_gm.json("edit", m.id)
    assert data["title"] == "Still bare"
    assert data["version"] == 2
    editor.will("text = text.replace('title: Still bare', 'title: {')")
    bare_gm.fails(4, "edit", m.id)
    assert (bare_store.db().gitdir / "gitmem" / "edits" / f"{m.id}.md").exists()


# -- update / append -------------------------------------------------------------------------------


def test_update_body_and_fields(gm: Gitmem, store: Store, git: GitRunner) -> None:
    memory_id = add(gm, "one\n", "--title", "T", "--tag", "a", "--tag", "b")
    out = gm("update", memory_id, "two\n", "--tag", "c", "--category", "patterns").stdout
    assert out == f"{memory_id} is at version 2\n"
    m = store.read(memory_id)
    assert (m.body, m.tags, m.category, m.title) == ("two\n", ("c",), "patterns", "T")
    gm("update", memory_id, "--title", "Only the title")
    assert store.read(memory_id).body == "two\n"
    gm("update", memory_id, "-", input="three from stdin\n")
    assert store.read(memory_id).body == "three from stdin\n"
    data = gm.json("update", memory_id, "--agent", "athena")
    assert data["agent"] == "athena"
    assert data["version"] == 5
    assert git(store.path, "log", "-1", "--format=%an").strip() == "athena"


def test_update_that_changes_nothing_makes_no_commit(
    gm: Gitmem, store: Store, git: GitRunner
) -> None:
    memory_id = add(gm, "same\n", "--title", "T")
    before = commits(git, store)
    assert (
        gm("update", memory_id, "same\n", "--title", "T").stdout == f"{memory_id} is at version 1\n"
    )
    assert commits(git, store) == before


def test_update_expected_version_conflict(gm: Gitmem, store: Store, git: GitRunner) -> None:
    memory_id = add(gm, "one\n")
    gm("update", memory_id, "two\n", "--expected-version", "1")
    before = commits(git, store)
    line = gm.fails(6, "update", memory_id, "three\n", "--expected-version", "1")
    assert "is at version 2, not 1" in line
    assert "hint: read it again" in line
    assert commits(git, store) == before
    assert store.read(memory_id).body == "two\n"


def test_update_status_archived_hides_it(gm: Gitmem) -> None:
    memory_id = add(gm, "old news\n")
    gm("update", memory_id, "--status", "archived")
    assert gm.json("ls") == []
    assert [m["id"] for m in gm.json("ls", "--all")] == [memory_id]
    assert "status 'gone'" in gm.fails(4, "update", memory_id, "--status", "gone")


def test_update_missing_is_not_found(gm: Gitmem) -> None:
    gm.fails(3, "update", "mem_missing", "x")


def test_append(gm: Gitmem, store: Store) -> None:
    memory_id = add(gm, "first line")
    assert gm("append", memory_id, "second line").stdout == f"{memory_id} is at version 2\n"
    gm("append", memory_id, "-", input="third line\n")
    assert store.read(memory_id).body == "first line\nsecond line\nthird line\n"
    data = gm.json("append", memory_id, "fourth", "--expected-version", "3", "--agent", "bot")
    assert data["version"] == 4
    gm.fails(6, "append", memory_id, "fifth", "--expected-version", "3")
    gm.fails(3, "append", "mem_missing", "x")
    gm.fails(2, "append", memory_id)  # TEXT is required


# -- supersede -------------------------------------------------------------------------------------


def test_supersede_prints_the_new_id(gm: Gitmem, store: Store, git: GitRunner) -> None:
    old = add(gm, "release/X.Y\n", "--title", "Branches", "--category", "project-conventions")
    new = gm("supersede", old, "release/vX.Y\n", "--agent", "hermes").stdout.strip()
    assert UUID_ID.fullmatch(new)
    m = store.read(new)
    assert (m.supersedes, m.version, m.title, m.category) == (
        old,
        1,
        "Branches",
        "project-conventions",
    )
    assert store.read(old).version == 1  # not touched
    assert f"Gitmem-Supersedes: {old}" in git(store.path, "log", "-1", "--format=%B")
    assert [x["id"] for x in gm.json("ls")] == [new]
    table = gm("ls", "--all").stdout
    assert re.search(rf"{old}\s+1\s+project-conventions\s+Branches\s+repo\s+superseded", table)


def test_supersede_from_stdin_with_an_id(gm: Gitmem, store: Store) -> None:
    old = add(gm, "a\n")
    data = gm.json("supersede", old, "--id", "the-new-one", "--title", "Newer", input="b\n")
    assert data["id"] == "the-new-one"
    assert data["supersedes"] == old
    assert data["body"] == "b\n"
    gm.fails(5, "supersede", old, "c", "--id", "the-new-one")
    gm.fails(3, "supersede", "mem_missing", "c")
    gm.fails(4, "supersede", old, "c", "--id", old)


# -- rm / restore ----------------------------------------------------------------------------------


def test_rm_and_restore(gm: Gitmem, store: Store, git: GitRunner) -> None:
    memory_id = add(gm, "keep me\n", "--title", "Precious")
    out = gm("rm", memory_id, "-m", "tidying").stdout
    assert out == f"Deleted {memory_id} (gitmem restore {memory_id} brings it back)\n"
    assert store.get(memory_id) is None
    assert git(store.path, "log", "-1", "--format=%(trailers:key=Gitmem-Op,valueonly)").strip() == (
        "delete"
    )
    line = gm.fails(3, "rm", memory_id)
    assert line == (
        f"gitmem: error: no memory {memory_id} (hint: gitmem ls --all lists current memories; "
        "gitmem log --op delete shows deleted ones)"
    )
    assert gm("restore", memory_id).stdout == f"Restored {memory_id} as version 2\n"
    assert store.read(memory_id).body == "keep me\n"
    assert "exists" in gm.fails(5, "restore", memory_id)
    assert gm.json("rm", memory_id) == {"id": memory_id, "deleted": True}
    gm.fails(3, "restore", "mem_never_was")


def test_restore_at_rolls_back(gm: Gitmem, store: Store) -> None:
    memory_id = add(gm, "v1\n")
    gm("update", memory_id, "v2\n")
    data = gm.json("restore", memory_id, "--at", "HEAD~1")
    assert data["body"] == "v1\n"
    assert data["version"] == 3


# -- ls --------------------------------------------------------------------------------------------


def test_ls_table_and_filters(gm: Gitmem, store: Store) -> None:
    assert gm("ls").stdout == "No memories.\n"
    a = add(gm, "a", "--title", "Alpha", "--category", "patterns", "--tag", "x", "--tag", "y")
    b = add(gm, "b", "--title", "Beta", "--category", "corrections", "--tag", "x")
    c = add(gm, "c")
    lines = gm("ls").stdout.splitlines()
    assert lines[0].split() == ["ID", "VER", "CATEGORY", "TITLE", "SCOPE"]
    assert sorted(line.split() for line in lines[1:]) == sorted(
        [
            [a, "1", "patterns", "Alpha", "repo"],
            [b, "1", "corrections", "Beta", "repo"],
            [c, "1", "-", "(untitled)", "repo"],
        ]
    )

    def ids(*args: str) -> set[str]:
        return {m["id"] for m in gm.json("ls", *args)}

    assert ids("--category", "patterns") == {a}
    assert ids("--tag", "x") == {a, b}
    assert ids("--tag", "x", "--tag", "y") == {a}
    assert ids("--scope", "repo") == {a, b, c}
    gm.fails(4, "ls", "--scope", "user")  # this store has no user scope


def test_ls_pages(gm: Gitmem, store: Store, clock: FixedClock) -> None:
    """--limit/--offset give a page of the listing, in the listing's order; with --all, a
    page's status knows of successors outside the page."""
    made = []
    for i in range(7):
        clock.advance(minutes=1)
        made.append(store.create(f"m{i}", title="T" * (i + 1), category="c" * (7 - i)).id)
    root = made[3]
    clock.advance(minutes=1)
    made.append(store.supersede(root, "newer", title="newer").id)
    whole_all = gm("ls", "--all").stdout
    listed = [line.split()[0] for line in whole_all.splitlines()[1:]]
    assert listed == made
    page = gm("ls", "--all", "--limit", "3", "--offset", "2").stdout.splitlines()
    assert [line.split()[0] for line in page[1:]] == made[2:5]
    assert page[2].split()[-1] == "superseded"  # made[3], superseded by the last one
    assert gm("ls", "--limit", "2", "--offset", "100").stdout == "No memories.\n"
    assert [m["id"] for m in gm.json("ls", "--all", "--limit", "2", "--offset", "6")] == made[6:]


def test_ls_json_shape(gm: Gitmem, store: Store) -> None:
    memory_id = add(gm, "x", "--title", "T")
    listed = gm.json("ls")
    assert listed == [store.read(memory_id).to_dict()]
    # --json is accepted before the command name too
    assert json.loads(gm("--json", "ls").stdout) == listed


def test_ls_at(gm: Gitmem) -> None:
    first = add(gm, "a")
    add(gm, "b")
    assert [m["id"] for m in gm.json("ls", "--at", "HEAD~1")] == [first]


# -- history / log ---------------------------------------------------------------------------------


def test_history_text_and_json(gm: Gitmem, store: Store, clock: FixedClock) -> None:
    root = store.create("v1\n", title="Root", agent="alice")
    clock.advance(minutes=1)
    store.update(root.id, "v2\n")
    clock.advance(minutes=1)
    new = store.supersede(root.id, "v3\n", title="Successor", agent="bob")
    text = gm("history", new.id).stdout
    lines = text.splitlines()
    assert lines[0] == root.id
    assert lines[1].split() == ["VER", "TIME", "OP", "AUTHOR", "COMMIT", "VALID", "TITLE"]
    assert lines[2].split()[:4] == ["1", "2026-11-22T10:00:00Z", "create", "alice"]
    assert lines[3].split()[:3] == ["2", "2026-11-22T10:01:00Z", "update"]
    assert lines[4] == f"{new.id} (supersedes {root.id})"
    assert lines[6].split()[:4] == ["1", "2026-11-22T10:02:00Z", "supersede", "bob"]
    assert lines[6].split()[-1] == "Successor"

    data = gm.json("history", new.id)
    assert data["id"] == new.id
    assert data["warnings"] == []
    assert [(v["id"], v["version"], v["op"]) for v in data["versions"]] == [
        (root.id, 1, "create"),
        (root.id, 2, "update"),
        (new.id, 1, "supersede"),
    ]
    assert data["versions"][0]["memory"]["body"] == "v1\n"
    assert set(data["versions"][0]) == {
        "id",
        "version",
        "commit",
        "time",
        "author",
        "agent",
        "op",
        "memory",
    }
    gm.fails(3, "history", "mem_missing")


def test_history_of_a_deleted_memory(gm: Gitmem) -> None:
    memory_id = add(gm, "x", "--title", "Gone")
    gm("rm", memory_id)
    lines = gm("history", memory_id).stdout.splitlines()
    assert lines[-1].split()[2] == "delete"
    assert lines[-1].endswith("(deleted)")


def test_log_filters(gm: Gitmem, store: Store, clock: FixedClock) -> None:
    a = store.create("a", title="By alice", agent="alice")
    clock.advance(days=1)
    store.create("b", title="By bob", agent="bob")
    clock.advance(days=1)
    store.update(a.id, "a2", agent="bob")
    text = gm("log").stdout.splitlines()
    assert text[0].split() == ["COMMIT", "TIME", "AUTHOR", "SUBJECT"]
    assert text[1].split()[1:] == ["2026-11-24T10:00:00Z", "bob", "update:", "By", "alice"]
    assert text[-1].split()[-2:] == ["gitmem", "store"]  # the init commit

    assert [e["subject"] for e in gm.json("log", "--agent", "alice")] == ["create: By alice"]
    assert [e["subject"] for e in gm.json("log", "--op", "update")] == ["update: By alice"]
    assert [e["ops"] for e in gm.json("log", "--id", a.id)] == [["update"], ["create"]]
    assert len(gm.json("log", "-n", "2")) == 2
    assert len(gm.json("log", "--limit", "0")) == 0
    window = gm.json("log", "--since", "2026-11-23", "--until", "2026-11-23T23:59:59Z")
    assert [e["subject"] for e in window] == ["create: By bob"]
    entry = gm.json("log", "--agent", "bob", "-n", "1")[0]
    assert set(entry) == {
        "commit",
        "time",
        "author",
        "author_email",
        "subject",
        "ops",
        "ids",
        "supersedes",
        "agent",
        "session",
        "scope",
        "ids_unlisted",
    }
    assert entry["ids_unlisted"] == 0
    assert "since" in gm.fails(4, "log", "--since", "last tuesday")
    assert gm("log", "--agent", "nobody").stdout == ""


# -- errors and global options ---------------------------------------------------------------------


def test_store_errors_exit_7(tmp_path: Path, git: GitRunner) -> None:
    missing = Gitmem(tmp_path / "nowhere", make_runner())
    line = missing.fails(7, "ls")
    assert line == (
        f"gitmem: error: no store at {tmp_path / 'nowhere'} "
        f"(hint: create it with: gitmem init {tmp_path / 'nowhere'}; a command that writes "
        "(gitmem add ...) makes it too)"
    )
    plain = tmp_path / "plain-repo"
    git(tmp_path, "init", "-q", str(plain))
    assert "not a gitmem store" in Gitmem(plain, make_runner()).fails(7, "ls")


def test_gitmem_dir_picks_the_store(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    m = store.create("via env\n")
    monkeypatch.setenv("GITMEM_DIR", str(store.path))
    gm = Gitmem(None, make_runner())
    assert [x["id"] for x in gm.json("ls")] == [m.id]


def test_usage_errors_exit_2_in_one_line(gm: Gitmem) -> None:
    assert "No such command" in gm.fails(2, "frobnicate")
    assert "--nope" in gm.fails(2, "ls", "--nope")
    assert "hint: see 'gitmem show --help'" in gm.fails(2, "show")
    assert "'many'" in gm.fails(2, "update", "mem_x", "--expected-version", "many")


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(
    gm: Gitmem, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(self: Store, *args: object, **kwargs: object) -> None:
        raise RuntimeError("the disk is full of bees")

    monkeypatch.setattr(Store, "list", explode)  # what `gitmem ls` reads through
    line = gm.fails(1, "ls")
    assert line == (
        "gitmem: error: unexpected RuntimeError: the disk is full of bees "
        "(hint: run again with --debug for the traceback, and please report it)"
    )
    result = gm("--debug", "ls", code=1)
    assert "Traceback (most recent call last)" in result.stderr
    assert "RuntimeError: the disk is full of bees" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("gitmem: error: unexpected")


def test_debug_keeps_the_exit_code(gm: Gitmem) -> None:
    result = gm("--debug", "show", "mem_missing", code=3)
    assert "Traceback (most recent call last)" in result.stderr
    assert "NotFoundError" in result.stderr
    assert result.stderr.rstrip().splitlines()[-1].startswith("gitmem: error: no memory")
    from_env = gm("show", "mem_missing", code=3, env={"GITMEM_DEBUG": "1"})
    assert "Traceback (most recent call last)" in from_env.stderr


def test_every_command_has_help_with_examples() -> None:
    runner = make_runner()
    top = runner.invoke(cli, ["--help"])
    assert top.exit_code == 0
    for name in cli.list_commands(None):  # type: ignore[arg-type]
        result = runner.invoke(cli, [name, "--help"])
        assert result.exit_code == 0, name
        assert "Example" in result.stdout, name
        assert f"gitmem {name}" in result.stdout, name


def test_version() -> None:
    result = Gitmem(None, make_runner())("--version")
    assert result.stdout == f"gitmem, version {gitmem.__version__}\n"


def test_one_line_error_helper_rejects_tracebacks() -> None:
    with pytest.raises(AssertionError):
        one_line_error("Traceback (most recent call last):\ngitmem: error: x\n")


def test_library_warnings_are_lines_on_stderr(gm: Gitmem, store: Store, git: GitRunner) -> None:
    memory_id = add(gm, "fine\n", "--title", "Fine")
    broken = store.path / "memories" / "zz" / "mem_zz.md"
    broken.parent.mkdir()
    broken.write_text("---\nid: [unclosed\n---\nbody\n")
    git(store.path, "add", "-A")
    git(store.path, "commit", "-qm", "a file written by hand, badly")
    result = gm("ls")
    assert memory_id in result.stdout
    assert "mem_zz" not in result.stdout
    lines = result.stderr.splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("gitmem: warning: skipping memories/zz/mem_zz.md: ")


def test_project_and_user_stores_together(
    tmp_path: Path, git: GitRunner, monkeypatch: pytest.MonkeyPatch, isolated_home: Path
) -> None:
    gm = Gitmem(None, make_runner())
    gm("init")  # the user store, at $GITMEM_HOME
    project = tmp_path / "project"
    git(tmp_path, "init", "-q", str(project))
    monkeypatch.chdir(project)
    gm("init", "--project")
    in_project = add(gm, "project fact", "--title", "P")
    personal = add(gm, "personal fact", "--title", "U", "--scope", "user")
    lines = gm("ls").stdout.splitlines()
    rows = {line.split()[0]: line.split()[-1] for line in lines[1:]}
    assert rows == {in_project: "repo", personal: "user"}
    assert [m["id"] for m in gm.json("ls", "--scope", "user")] == [personal]
    assert gitmem.open(isolated_home / ".gitmem").read(personal).body == "personal fact"
    # writes to a memory go to the store that holds it
    gm("append", personal, "more")
    assert gitmem.open(isolated_home / ".gitmem").read(personal).version == 2


def test_no_command_prints_the_help() -> None:
    result = make_runner().invoke(cli, [])
    assert result.exit_code in {0, 2}  # click < 8.2 exits 0, later versions 2
    assert "Usage: gitmem [OPTIONS] COMMAND" in result.output
    assert "gitmem: error" not in result.output


def test_init_at_the_global_store_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    data = Gitmem(tmp_path / "via-option", make_runner()).json("init")
    assert (data["path"], data["scope"]) == (str(tmp_path / "via-option"), "repo")
    monkeypatch.setenv("GITMEM_DIR", str(tmp_path / "via-env"))
    data = Gitmem(None, make_runner()).json("init", "--scope", "user")
    assert (data["path"], data["scope"]) == (str(tmp_path / "via-env"), "user")


# -- progress on a terminal -------------------------------------------------------------------


@pytest.mark.slow
def test_doctor_draws_its_bar_on_stderr_and_never_under_json(
    gm: Gitmem, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clitools import pretend_terminal

    with store.transaction(message="many"):
        for n in range(750):  # 7 checks x 750 memories: past the bar's 5,000 units
            store.create(f"memory {n}\n")
    gm("doctor", "--fix")
    plain = gm("doctor")
    pretend_terminal(monkeypatch)
    drawn = gm("doctor")
    assert drawn.stdout == plain.stdout  # the report alone on stdout
    assert "checking" in drawn.stderr and "100%" in drawn.stderr
    quiet = gm("doctor", "--json")
    assert quiet.stderr == ""
    assert json.loads(quiet.stdout)["healthy"] is True


def test_gc_says_what_it_is_doing_on_a_terminal_only(
    gm: Gitmem, store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    from clitools import pretend_terminal

    store.create("something to pack")
    first = gm("gc")
    assert first.stderr == "" and "packed " in first.stdout
    pretend_terminal(monkeypatch)
    store.create("something more")
    second = gm("gc")
    assert second.stderr == "gitmem gc: packing repository with git gc...\n"
    assert "gitmem gc:" not in second.stdout and "packed " in second.stdout
    store.create("and more")
    quiet = gm("gc", "--json")
    assert quiet.stderr == ""
    assert json.loads(quiet.stdout)[0]["loose_objects_after"] == 0
