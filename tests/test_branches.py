"""Branch-aware writes: the checked-out branch, and proposal branches for review.

A work-tree store writes to the branch a person checked out (not to main behind their
back); ``branch=`` (``gitmem --branch``) writes a proposal, made from main, that
``gitmem review main..BRANCH`` shows and a merge brings in.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from clitools import Gitmem, make_runner
from conftest import run_git

import gitmem
from gitmem import InvalidInputError
from gitmem.features import review as reviewing


def rev(path: Path, name: str) -> str:
    return run_git(path, "rev-parse", name).strip()


def test_a_work_tree_store_writes_to_the_checked_out_branch(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s")
    store.create("on main", title="main fact")
    main_before = rev(tmp_path / "s", "main")
    run_git(tmp_path / "s", "checkout", "-q", "-b", "feature")
    feature = gitmem.open(tmp_path / "s")
    assert feature.db().branch == "feature"
    memory = feature.create("on the feature branch", title="feature fact")
    assert rev(tmp_path / "s", "main") == main_before  # main untouched
    assert "on the feature branch" in (tmp_path / "s" / memory.path).read_text()
    assert run_git(tmp_path / "s", "status", "--porcelain").strip() == ""
    assert {m.title for m in feature.list()} == {"main fact", "feature fact"}
    run_git(tmp_path / "s", "checkout", "-q", "main")
    back = gitmem.open(tmp_path / "s")
    assert {m.title for m in back.list()} == {"main fact"}  # the index of main, not feature's
    back.create("main again")
    assert run_git(tmp_path / "s", "status", "--porcelain").strip() == ""


@pytest.mark.parametrize("bare", [False, True])
def test_a_proposal_branch_for_review(tmp_path: Path, bare: bool) -> None:
    path = tmp_path / ("s.git" if bare else "s")
    store = gitmem.init(path, bare=bare)
    kept = store.create("the deploy target is staging", title="deploy")
    main_before = rev(path, "main")
    agent = gitmem.open(path, branch="proposal/agent-7")
    assert agent.read(kept.id).body == "the deploy target is staging"  # made from main
    agent.update(kept.id, "the deploy target is production")
    added = agent.create("tests need docker", title="docker")
    assert rev(path, "main") == main_before
    assert gitmem.open(path).read(kept.id).body == "the deploy target is staging"
    result = reviewing.review(gitmem.open(path), "main..proposal/agent-7")
    assert {c.id: c.kind for c in result.changes} == {kept.id: "updated", added.id: "added"}
    if not bare:  # the work tree still shows main
        assert "staging" in (path / kept.path).read_text()
        assert run_git(path, "status", "--porcelain").strip() == ""
    # Merging the proposal (here with git) brings it into main.
    if bare:
        run_git(path, "update-ref", "refs/heads/main", rev(path, "proposal/agent-7"))
    else:
        run_git(path, "merge", "-q", "--ff-only", "proposal/agent-7")
    assert gitmem.open(path).read(kept.id).body == "the deploy target is production"


def test_cli_branch_option_and_bad_names(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s")
    cli = Gitmem(None, make_runner())
    base = ["--store", str(store.path), "--branch", "review-me"]
    memory_id = cli(*base, "add", "proposed fact").stdout.strip()
    assert gitmem.open(store.path, branch="review-me").read(memory_id)
    assert gitmem.open(store.path).get(memory_id) is None
    out = cli("--store", str(store.path), "review", "main..review-me", "--format", "text").stdout
    assert "1 added" in out
    with pytest.raises(InvalidInputError, match="not a valid branch name"):
        gitmem.open(store.path, branch="bad..name")


def test_a_new_branch_index_starts_from_mains(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s")
    store.create("on main", title="main fact")
    store.index().catch_up()
    proposal = gitmem.open(tmp_path / "s", branch="proposal")
    assert proposal.index().catch_up() is None  # main's index, copied: already current
    proposal.create("on the proposal", title="proposal fact")
    stats = proposal.index().catch_up()
    assert stats is not None and not stats.rebuilt
    assert {m.title for m in proposal.list()} == {"main fact", "proposal fact"}
