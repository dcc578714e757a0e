"""The forgiving command line (issue 16): id prefixes, global options anywhere, did you mean,
one set of layer names, typo'd file types, one empty-body rule, text that starts with a dash,
non-UTF-8 arguments, bulk add, help in sections, status and where the store came from."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner, one_line_error

import gitmem
from gitmem import AmbiguousIdError, NotFoundError, Store
from gitmem.cli import cli as gitmem_cli


@pytest.fixture
def gm(store: Store) -> Gitmem:
    return Gitmem(store.path, make_runner())


def _two_with_prefix(store: Store) -> tuple[str, str]:
    a = store.create("one", id="mem_abc1-one").id
    b = store.create("two", id="mem_abc2-two").id
    return a, b


# -- prefixes -------------------------------------------------------------------------------


def test_resolve_id_unique_ambiguous_none(store: Store) -> None:
    a, b = _two_with_prefix(store)
    assert store.resolve_id("mem_abc1") == a
    assert store.resolve_id("mem_abc2...") == b  # as help texts write ids
    assert store.resolve_id(a) == a
    with pytest.raises(AmbiguousIdError) as err:
        store.resolve_id("mem_abc")
    assert err.value.candidates == [a, b]
    assert a in err.value.message and b in err.value.message
    with pytest.raises(NotFoundError):
        store.resolve_id("mem_zzz")


def test_resolve_id_finds_deleted_ids_for_restore(store: Store) -> None:
    a, _ = _two_with_prefix(store)
    store.delete(a)
    assert store.resolve_id("mem_abc1") == a


def test_resolve_id_in_both_scopes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    user = gitmem.init(Path(os.environ["GITMEM_HOME"]), scope="user")
    in_user = user.create("user fact", id="mem_u1-fact").id
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    repo = gitmem.init_project(project)
    in_repo = repo.create("project fact", id="mem_u2-fact").id
    monkeypatch.chdir(project)
    both = gitmem.open()
    assert sorted(map(str, both.scopes)) == ["repo", "user"]
    assert both.resolve_id("mem_u1") == in_user
    assert both.resolve_id("mem_u2") == in_repo
    with pytest.raises(AmbiguousIdError) as err:
        both.resolve_id("mem_u")
    assert err.value.candidates == [in_user, in_repo]
    assert both.resolve_id("mem_u1", scope="user") == in_user
    with pytest.raises(NotFoundError):
        both.resolve_id("mem_u1", scope="repo")
    runner = Gitmem(None, make_runner())
    assert runner("show", "mem_u1").stdout.endswith("user fact")
    line = runner.fails(4, "show", "mem_u")
    assert in_user in line and in_repo in line


def test_store_read_and_mcp_get_memory_take_a_prefix(store: Store) -> None:
    a, b = _two_with_prefix(store)
    assert store.read("mem_abc1").id == a
    assert store.read("mem_abc2...").body == "two"
    with pytest.raises(AmbiguousIdError):
        store.read("mem_abc")
    with pytest.raises(NotFoundError):
        store.read("mem_zzz")
    pytest.importorskip("mcp")
    from gitmem.entry.mcp import call, tools

    [get] = [t for t in tools(store) if t.name == "get_memory"]
    result, failed = call(get, {"id": "mem_abc1"})
    assert not failed and result.structured == {"memory": store.read(a).to_dict()}
    result, failed = call(get, {"id": "mem_abc"})
    assert failed and a in result.text and b in result.text
    result, failed = call(get, {"id": "mem_zzz"})
    assert failed and "no memory mem_zzz" in result.text
    assert "gitmem " not in result.text  # an agent has the tools, not the command line


def test_undo_takes_a_session_prefix(gm: Gitmem, store: Store) -> None:
    kept = store.create("kept", session_id="9b1f0000-aaaa")
    gone = store.create("gone", session_id="9b2e0000-bbbb")
    store.create("also gone", session_id="9b2e0000-bbbb")
    line = gm.fails(4, "undo", "--session", "9b")
    assert "9b1f0000-aaaa" in line and "9b2e0000-bbbb" in line
    out = gm("undo", "--session", "9b2e").stdout
    assert out.startswith("Undid 2 commit(s)")
    assert [m.id for m in store.list()] == [kept.id] and store.get(gone.id) is None
    assert "no commit of session" in gm.fails(3, "undo", "--session", "77")


def test_every_id_command_takes_a_prefix(gm: Gitmem, store: Store) -> None:
    a, b = _two_with_prefix(store)
    assert "one" in gm("show", "mem_abc1").stdout
    assert gm("update", "mem_abc1", "uno").stdout == f"{a} is at version 2\n"
    assert gm("append", "mem_abc1", "more").stdout == f"{a} is at version 3\n"
    assert "mem_abc1-one" in gm("history", "mem_abc1").stdout
    assert a in gm("log", "--id", "mem_abc1", "--format", "{ids}").stdout
    new = gm("supersede", "mem_abc2", "deux").stdout.strip()
    assert store.read(new).supersedes == b
    assert gm("rm", "mem_abc1").stdout.startswith(f"Deleted {a}")
    assert gm("restore", "mem_abc1").stdout.startswith(f"Restored {a}")
    line = gm.fails(4, "show", "mem_abc")
    assert "matches 2 memories" in line and a in line and b in line
    assert "no memory mem_nope" in gm.fails(3, "show", "mem_nope")
    assert gm.json("blame", "mem_abc1")
    assert a in gm("diff", "HEAD~4", "HEAD", "mem_abc1").stdout  # the restore is the append's
    linked = gm("add", "see the other", "--related", "mem_abc1:refines",
                "--related", "mem_later").stdout.strip()
    assert [(r.id, str(r.relationship)) for r in store.read(linked).related] == [
        (a, "refines"), ("mem_later", "relates-to")
    ]


# -- global options, did you mean, help -------------------------------------------------------


def test_global_options_after_the_command(store: Store, tmp_path: Path) -> None:
    store.create("hello", title="Hi", id="mem_g1")
    runner = Gitmem(None, make_runner())
    assert "mem_g1" in runner("ls", "--store", str(store.path)).stdout
    assert json.loads(runner("show", "mem_g1", "--store", str(store.path), "--json").stdout)[
        "title"
    ] == "Hi"
    assert runner("layer", "list", "project", "api", "--store", str(store.path)).stdout == (
        "(none)\n"
    )
    result = runner("show", "mem_nope", "--store", str(store.path), "--debug", code=3)
    assert "Traceback" in result.stderr  # --debug after the command counts too
    # the store named after the command is the one used (not the user store)
    assert not Path(os.environ["GITMEM_HOME"]).exists()


def test_did_you_mean(gm: Gitmem) -> None:
    line = gm.fails(2, "lss")
    assert "No such command 'lss'. Did you mean 'ls'?" in line
    assert "Did you mean 'history'?" in gm.fails(2, "histroy")
    assert "Did you mean 'create'?" in gm.fails(2, "layer", "crate")


def test_help_in_sections(gm: Gitmem) -> None:
    out = gm("--help").stdout
    order = [out.index(f"\n{title}:\n") for title in (
        "Memories", "History", "Search", "Layered documents", "Collaboration",
        "Integrations", "Maintenance",
    )]
    assert order == sorted(order)
    assert out.index("  add ") < out.index("History:") < out.index("  ls ")


# -- layers ------------------------------------------------------------------------------


def test_one_set_of_layer_names(gm: Gitmem) -> None:
    gm("layer", "create", "shared-project", "known_issues", "-p", "api", "--content", "# K")
    gm("layer", "create", "project", "review_history", "-p", "api", "--content", "# R")
    for name in ("shared-project", "project"):
        out = gm("layer", "list", name, "api").stdout
        assert "projects/api/known_issues" in out and "projects/api/review_history" in out
    assert "is not a layer" in gm.fails(2, "layer", "list", "projects", "api")


def test_typod_file_type_is_refused(gm: Gitmem, store: Store) -> None:
    line = gm.fails(
        4, "layer", "create", "shared-project", "known_isues", "-p", "api", "--content", "x"
    )
    assert "did you mean 'known_issues'" in line and "--new-type" in line
    assert store.get("projects/api/known_isues") is None
    gm("layer", "create", "shared-project", "known_isues", "-p", "api", "--content", "x",
       "--new-type")
    gm("layer", "create", "shared-project", "deploy_notes", "-p", "api", "--content", "x")


def test_layer_append_creates_a_missing_document(gm: Gitmem, store: Store) -> None:
    out = gm("layer", "append", "projects/api/review_history", "-", input="## Review\n").stdout
    assert out == "created projects/api/review_history (it did not exist)\n"
    gm("layer", "append", "projects/api/review_history", "## Another")
    assert "## Another" in store.read("projects/api/review_history").body


# -- bodies ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "stdin"),
    [(["add", ""], None), (["add", "  \n"], None), (["add", "-"], b""), (["add"], b"")],
    ids=["empty-arg", "blank-arg", "dash-empty-stdin", "no-arg-empty-stdin"],
)
def test_one_rule_for_empty_bodies(
    gm: Gitmem, store: Store, args: list[str], stdin: bytes | None
) -> None:
    # nothing given at all is a usage error; text given empty is the library's refusal
    line = gm.fails(2 if args == ["add"] else 4, *args, input=stdin)
    assert "empty" in line or "no body" in line
    assert store.list() == []
    gm(*args, "--allow-empty", input=stdin)
    assert len(store.list()) == 1


def test_empty_text_refused_for_append_and_update(gm: Gitmem, store: Store) -> None:
    memory = store.create("x", id="mem_e1")
    assert "--allow-empty" in gm.fails(4, "append", memory.id, "")
    assert "--allow-empty" in gm.fails(4, "update", memory.id, "")
    assert store.read(memory.id).version == 1


def test_text_starting_with_a_dash(gm: Gitmem, store: Store) -> None:
    memory = store.create("# List\n", id="mem_d1")
    gm("append", memory.id, "- a bullet", "--agent", "ann")
    assert store.read(memory.id).body == "# List\n- a bullet"
    new = gm("add", "- first item", "--title", "List").stdout.strip()
    assert store.read(new).body == "- first item"
    gm("layer", "create", "shared-project", "project_overview", "-p", "api",
       "--content", "- Language: Python")


# -- bad bytes ------------------------------------------------------------------------------


BAD = os.fsdecode(b"caf\xe9")


@pytest.mark.parametrize(
    "args",
    [["add", BAD], ["add", "ok", "--title", BAD], ["search", BAD], ["show", BAD],
     ["ls", "--tag", BAD], ["layer", "read", "project", BAD, "-p", "x"]],
    ids=["body", "title", "search", "show", "tag", "layer"],
)
def test_non_utf8_arguments_are_invalid_input(gm: Gitmem, store: Store, args: list[str]) -> None:
    line = gm.fails(4, *args)
    assert "is not UTF-8 text" in line and "caf\\xe9" in line
    assert store.list() == []


def test_non_utf8_argument_as_a_process(tmp_path: Path) -> None:
    """The real path: Python decodes argv with surrogateescape; one line, exit 4."""
    store = gitmem.init(tmp_path / "s")
    env = {**os.environ, "GITMEM_DIR": str(store.path)}
    result = subprocess.run(
        [sys.executable, "-m", "gitmem", "add", b"caf\xe9"], capture_output=True, env=env
    )
    assert result.returncode == 4
    assert one_line_error(result.stderr.decode())
    assert store.list() == []


# -- bulk add -------------------------------------------------------------------------------


def test_add_jsonl_is_one_commit(gm: Gitmem, store: Store) -> None:
    before = len(store.log())
    lines = '{"body": "a", "title": "A", "tags": ["x"]}\n\n{"body": "b", "category": "c"}\n'
    ids = gm("add", "--jsonl", "-", "--agent", "bulk", input=lines).stdout.split()
    assert len(ids) == 2
    assert [store.read(i).body for i in ids] == ["a", "b"]
    assert store.read(ids[0]).agent == "bulk" and store.read(ids[1]).category == "c"
    assert len(store.log()) == before + 1


def test_add_jsonl_bad_line_stores_nothing(gm: Gitmem, store: Store) -> None:
    lines = '{"body": "a"}\n{"body": "b", "colour": "red"}\n'
    assert "line 2" in gm.fails(4, "add", "--jsonl", "-", input=lines)
    assert "line 1" in gm.fails(4, "add", "--jsonl", "-", input="not json\n")
    bad_field = '{"body": "a"}\n{"body": "b", "trigger": "x"}\n'
    assert "line 2" in gm.fails(4, "add", "--jsonl", "-", input=bad_field)
    assert store.list() == []


# -- where am I -----------------------------------------------------------------------------


def test_status_says_which_store_and_why(gm: Gitmem, store: Store) -> None:
    store.create("x", id="mem_s1")
    out = gm("status").stdout
    assert f"repo store (writes go here): {store.path.absolute()}" in out
    assert "named by --store" in out and "branch:  main at" in out
    data = gm.json("status")
    (row,) = data["stores"]
    assert row["tip"] == str(store.db().tip().id)  # type: ignore[union-attr]
    assert row["merge_driver"] and row["branch"] == "main"
    assert set(row["hooks"]) >= {"pre-commit"}
    assert row["author"] == "Test User <test@example.com>" and row["git_identity"] is True


def test_status_names_the_default_author_without_a_git_identity(gm: Gitmem) -> None:
    import pygit2
    from pygit2.enums import ConfigLevel

    # no identity anywhere libgit2 looks (the isolated_home fixture puts the path back)
    empty = Path(os.environ["HOME"]) / "no-config"
    pygit2.settings.search_path[ConfigLevel.GLOBAL] = str(empty)
    out = gm("status").stdout
    assert "author:  gitmem-user <gitmem-user@gitmem.invalid> (no git identity" in out


def test_shell_completion_sees_lazy_commands(gm: Gitmem) -> None:
    env = {"_GITMEM_COMPLETE": "bash_complete", "COMP_WORDS": "gitmem st", "COMP_CWORD": "1"}
    result = make_runner().invoke(gitmem_cli, [], env=env, prog_name="gitmem")
    assert "plain,status" in result.stdout and "plain,stale" in result.stdout
    env["COMP_WORDS"], env["COMP_CWORD"] = "gitmem ls --st", "2"
    result = make_runner().invoke(gitmem_cli, [], env=env, prog_name="gitmem")
    assert "plain,--store" in result.stdout


def test_status_in_a_project_shows_both_stores(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gitmem.init(Path(os.environ["GITMEM_HOME"]), scope="user")
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q", str(project)], check=True)
    gitmem.init_project(project)
    monkeypatch.chdir(project)
    data = Gitmem(None, make_runner()).json("status")
    whys = {row["scope"]: row["why"] for row in data["stores"]}
    assert "walking up" in whys["repo"] and "read together" in whys["user"]


def test_creating_the_user_store_says_where(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    result = Gitmem(None, make_runner())("add", "a fact")
    home = os.environ["GITMEM_HOME"]
    assert f"gitmem: created a new store at {home} (the user store: " in result.stderr
    assert "created" not in Gitmem(None, make_runner())("ls").stderr


# -- output ---------------------------------------------------------------------------------


def test_search_says_when_it_cut_and_prints_comparable_scores(gm: Gitmem, store: Store) -> None:
    store.create("about walruses", title="Walrus facts", id="mem_w0")
    for n in range(1, 4):
        store.create(f"walrus note {n}", id=f"mem_w{n}")
    out = gm("search", "walrus*", "-n", "2").stdout
    assert out.rstrip().endswith("(showing the first 2 memories; --limit N shows more)")
    assert out.count("mem_w") == 2
    assert "[title match, bm25 " in out and "1000" not in out
    assert "showing the first" not in gm("search", "walrus*", "-n", "4").stdout
    data = gm.json("search", "walrus*", "-n", "3")
    assert data["truncated"] is True and len(data["hits"]) == 3
    assert gm.json("search", "walrus*", "-n", "5")["truncated"] is False


def test_gc_says_what_it_did(gm: Gitmem, store: Store) -> None:
    store.create("something to pack")
    first = gm("gc").stdout
    assert "packed " in first and "loose objects" in first
    if "larger" in first:
        assert "outweigh" in first  # a growth is explained, not reported as a saving
    assert "already packed, nothing to do" in gm("gc").stdout
