"""`gitmem update-branch` and the CI recipes that run it, against a local bare hub.

A host's merge button merges with plain git and no merge driver. Here a pull request's
branch and its base edit the same line of one memory, so plain `git merge` stops; the
command (and each host's recipe, the shell text taken from the YAML `gitmem ci init
--update-branch` writes, run with bash and the variables the host sets) merges the base into
the branch with gitmem's merge and pushes it to the hub, after which a plain `git merge` of
the branch into the base, with no driver registered anywhere, succeeds and keeps both sides.
"""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from clitools import Gitmem, make_runner, run_step
from conftest import run_git

import gitmem
from gitmem import ConflictError, FixedClock, InvalidInputError, NotFoundError
from gitmem.entry import ci
from gitmem.features import conflicts as forks
from gitmem.features.update_branch import update_branch
from gitmem.format.layout import memory_path
from gitmem.store import sync as S

BODY = "alpha\nbeta\ngamma\n"
BASE_BODY = "alpha, as the base says\nbeta\ngamma\n"
PR_BODY = "alpha, as the pull request says\nbeta\ngamma\n"


@dataclass
class Hub:
    root: Path
    hub: Path
    memory: str
    """The memory both branches edit in the same line."""
    other: str
    """A memory neither touches."""

    def checkout(self, name: str, branch: str = "feature") -> Path:
        """A clone as CI makes it: plain git, no merge driver, ``branch`` checked out."""
        path = self.root / name
        run_git(self.root, "clone", "-q", str(self.hub), name)
        run_git(path, "checkout", "-q", branch)
        return path

    def tip(self, branch: str) -> str:
        return run_git(self.hub, "rev-parse", f"refs/heads/{branch}").strip()

    def plain_merge(self, name: str) -> subprocess.CompletedProcess[str]:
        """``git merge origin/feature`` into main in a fresh plain clone, as a host merges."""
        path = self.root / name
        run_git(self.root, "clone", "-q", str(self.hub), name)
        assert not run_git(path, "config", "--get-regexp", "^merge\\.", check=False).strip()
        return subprocess.run(
            ["git", "-C", str(path), "merge", "--no-edit", "origin/feature"],
            capture_output=True,
            text=True,
        )


@pytest.fixture
def hub(tmp_path: Path) -> Hub:
    """main and feature on a bare hub, each editing the first line of one memory."""
    clock = FixedClock("2026-11-22T10:00:00Z")
    run_git(tmp_path, "init", "-q", "--bare", "hub.git")
    hub = tmp_path / "hub.git"
    seed = gitmem.init(tmp_path / "seed", clock=clock)
    memory = seed.create(BODY, title="shared fact", agent="seeder").id
    other = seed.create("untouched", title="other fact", agent="seeder").id
    S.add_remote(seed.db(), "origin", str(hub))
    seed.sync()
    run_git(seed.path, "checkout", "-q", "-b", "feature")
    gitmem.open(seed.path, clock=clock).update(memory, PR_BODY, agent="proposer")
    run_git(seed.path, "push", "-q", "origin", "feature")
    run_git(seed.path, "checkout", "-q", "main")
    clock.advance(seconds=60)
    gitmem.open(seed.path, clock=clock).update(memory, BASE_BODY, agent="maintainer")
    run_git(seed.path, "push", "-q", "origin", "main")
    return Hub(tmp_path, hub, memory, other)


def assert_both_kept(hub: Hub, name: str) -> None:
    """A plain git merge of the pushed branch into main: clean, both edits kept."""
    result = hub.plain_merge(name)
    assert result.returncode == 0, result.stdout + result.stderr
    merged = gitmem.open(hub.root / name)
    bodies = {m.body for m in merged.list(include_superseded=True)}
    assert {BASE_BODY, PR_BODY} <= bodies
    assert merged.get(hub.other) is not None
    assert [c.of for c in forks.conflicts(merged)] == [hub.memory]
    assert run_git(hub.root / name, "status", "--porcelain") == ""


def test_plain_git_cannot_merge_the_pull_request(hub: Hub) -> None:
    """Why the command exists: the host's merge stops on the memory."""
    result = hub.plain_merge("host")
    assert result.returncode != 0
    assert "CONFLICT" in result.stdout
    assert memory_path(hub.memory) in result.stdout


def test_update_branch_merges_the_base_in_one_commit(hub: Hub) -> None:
    work = hub.checkout("work")
    before = hub.tip("feature")
    result = update_branch(work, "origin/main")
    assert result.outcome == "merge" and result.branch == "feature"
    assert result.commit != result.before
    assert [f.of for f in result.forks] == [hub.memory]
    commit = run_git(work, "log", "-1", "--format=%P%n%s%n%b").splitlines()
    assert commit[0] == f"{before} {hub.tip('main')}"  # the branch first, then the base
    assert commit[1] == "merge: origin/main into feature"
    assert f"Gitmem-Fork: {result.forks[0].id} of {hub.memory}" in commit
    assert run_git(work, "status", "--porcelain") == ""
    assert run_git(work, "symbolic-ref", "HEAD").strip() == "refs/heads/feature"
    conflicts = Gitmem(work, make_runner()).json("conflicts")
    assert [(c["fork"], c["of"]) for c in conflicts] == [(result.forks[0].id, hub.memory)]

    run_git(work, "push", "-q", "origin", "feature")
    assert hub.tip("feature") == result.commit
    assert_both_kept(hub, "host")

    again = update_branch(work, "origin/main")
    assert again.outcome == "up-to-date" and again.commit == again.before


def test_cli_no_op_dirty_tree_and_missing_base(hub: Hub) -> None:
    work = hub.checkout("work")
    cli = Gitmem(work, make_runner())
    head = run_git(work, "rev-parse", "HEAD")
    # Uncommitted edits to a tracked file: refused, nothing touched.
    edited = work / memory_path(hub.other)
    edited.write_text(edited.read_text() + "local edit\n")
    error = cli.fails(6, "update-branch", "origin/main")
    assert "uncommitted changes" in error and memory_path(hub.other) in error
    assert run_git(work, "rev-parse", "HEAD") == head
    assert edited.read_text().endswith("local edit\n")
    run_git(work, "checkout", "-q", "--", ".")
    # An untracked file (a CI job's report) is no reason to refuse.
    (work / "gitmem-review.md").write_text("a report")
    assert "does not name a commit" in cli.fails(3, "update-branch", "origin/nope")

    # Never the user store by default: the clone checked out for the pull request is named.
    assert "--store" in Gitmem(None, make_runner()).fails(2, "update-branch", "origin/main")
    out = cli("update-branch", "origin/main").stdout
    assert "merged origin/main into feature" in out and f"fork: {hub.memory}" in out
    out = cli("update-branch", "origin/main").stdout
    assert out.startswith("already up to date: origin/main is merged into feature")
    assert cli.json("update-branch", "origin/main")["outcome"] == "up-to-date"


def test_if_conflicting_leaves_a_clean_pull_request_alone(hub: Hub, tmp_path: Path) -> None:
    """A branch plain git merges cleanly is not touched; without the flag it is updated."""
    work = hub.checkout("work", "main")
    run_git(work, "checkout", "-q", "-b", "clean", "HEAD~1")
    gitmem.open(work).update(hub.other, "changed on the clean branch only")
    head = run_git(work, "rev-parse", "HEAD").strip()
    result = update_branch(work, "origin/main", if_conflicting=True)
    assert result.outcome == "clean" and result.conflicting == []
    assert run_git(work, "rev-parse", "HEAD").strip() == head
    result = update_branch(work, "origin/main")
    assert result.outcome == "merge" and result.forks == []
    # And a conflicting one is merged, naming what plain git stopped on.
    run_git(work, "checkout", "-q", "feature")
    result = update_branch(work, "origin/main", if_conflicting=True)
    assert result.outcome == "merge" and result.conflicting == [memory_path(hub.memory)]


def test_detached_head_is_attached_to_the_named_branch(hub: Hub) -> None:
    work = hub.checkout("work")
    run_git(work, "checkout", "-q", "--detach")
    run_git(work, "branch", "-q", "-D", "feature")  # as GitLab's runner: no local branch
    with pytest.raises(InvalidInputError, match="HEAD is detached"):
        update_branch(work, "origin/main")
    result = update_branch(work, "origin/main", head="feature")
    assert result.attached and result.outcome == "merge"
    assert run_git(work, "symbolic-ref", "HEAD").strip() == "refs/heads/feature"
    assert run_git(work, "rev-parse", "feature").strip() == result.commit
    assert run_git(work, "status", "--porcelain") == ""
    # A local branch HEAD does not contain is not moved behind anyone's back.
    run_git(work, "checkout", "-q", "--detach", "origin/feature")
    with pytest.raises(ConflictError, match="does not contain"):
        update_branch(work, "origin/main", head="feature")
    assert run_git(work, "rev-parse", "feature").strip() == result.commit


def test_another_branch_is_updated_without_touching_the_work_tree(hub: Hub) -> None:
    work = hub.checkout("work", "main")
    run_git(work, "branch", "-q", "feature", "origin/feature")
    files = run_git(work, "ls-files", "-s")
    result = update_branch(work, "main", head="feature")
    assert result.outcome == "merge" and not result.attached
    assert run_git(work, "symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert run_git(work, "ls-files", "-s") == files and run_git(work, "status", "--porcelain") == ""
    with pytest.raises(NotFoundError):
        update_branch(work, "main", head="nowhere")


# -- the CI recipes ------------------------------------------------------------------------


def written_step(tmp_path: Path, host: str) -> str:
    """The update step's shell text, from the YAML `gitmem ci init --update-branch` writes."""
    store = gitmem.init(tmp_path / f"recipes-{host}")
    Gitmem(store.path, make_runner())("ci", "init", "--host", host, "--update-branch")
    text = (store.path / ci.UPDATE_BRANCH[host].path).read_text()
    data = yaml.safe_load(text)
    if host == "github":
        steps = data["jobs"]["update-branch"]["steps"]
        script = str(next(s for s in steps if s.get("name") == "update branch")["run"])
        assert script == ci.GITHUB_UPDATE_STEP
    else:
        (script,) = data["gitmem-update-branch"]["script"]
        assert script == ci.GITLAB_UPDATE_SCRIPT
    return script


GITHUB_ENV = {
    "GITHUB_BASE_REF": "main",
    "GITHUB_HEAD_REF": "feature",
    "GITHUB_REPOSITORY": "acme/memory",
    "GITMEM_HEAD_REPO": "acme/memory",
}


def test_github_recipe_pushes_the_merge_once(hub: Hub, tmp_path: Path) -> None:
    step = written_step(tmp_path, "github")
    # actions/checkout with `ref:` the pull request's branch: that branch, checked out.
    work = hub.checkout("run1")
    result = run_step(step, work, GITHUB_ENV)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "merged origin/main into feature" in result.stdout
    merged = hub.tip("feature")
    assert run_git(hub.hub, "log", "-1", "--format=%s%n%cn", merged).splitlines() == [
        "merge: origin/main into feature",
        "github-actions[bot]",
    ]
    assert_both_kept(hub, "host")
    # The push starts the workflow again: this time there is nothing to do or push.
    again = run_step(step, hub.checkout("run2"), GITHUB_ENV)
    assert again.returncode == 0, again.stderr
    assert "already up to date" in again.stdout
    assert hub.tip("feature") == merged


def test_github_recipe_leaves_forks_alone(hub: Hub) -> None:
    before = hub.tip("feature")
    result = run_step(
        ci.GITHUB_UPDATE_STEP, hub.checkout("run"), {**GITHUB_ENV, "GITMEM_HEAD_REPO": "x/fork"}
    )
    assert result.returncode == 0 and "x/fork: left alone" in result.stdout
    assert hub.tip("feature") == before


def gitlab_checkout(hub: Hub, name: str) -> Path:
    """As GitLab's runner checks out a merge request pipeline: a detached HEAD."""
    path = hub.checkout(name)
    run_git(path, "checkout", "-q", "--detach", "origin/feature")
    run_git(path, "branch", "-q", "-D", "feature")
    return path


def gitlab_env(hub: Hub, **more: str) -> dict[str, str]:
    return {
        "CI_MERGE_REQUEST_SOURCE_PROJECT_ID": "7",
        "CI_MERGE_REQUEST_PROJECT_ID": "7",
        "CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main",
        "CI_MERGE_REQUEST_SOURCE_BRANCH_NAME": "feature",
        "CI_REPOSITORY_URL": str(hub.hub),  # a path: the token rewrite leaves it alone
        "GITMEM_PUSH_TOKEN": "glpat-local",
        "GITLAB_USER_NAME": "Pat Lead",
        "GITLAB_USER_EMAIL": "pat@example.com",
        **more,
    }


@pytest.mark.slow
def test_gitlab_recipe_pushes_the_merge_once(hub: Hub, tmp_path: Path) -> None:
    script = written_step(tmp_path, "gitlab")
    before = hub.tip("feature")
    # Without the push token it merges but says it cannot push, and fails.
    result = run_step(script, gitlab_checkout(hub, "run0"), gitlab_env(hub, GITMEM_PUSH_TOKEN=""))
    assert result.returncode == 1 and "set GITMEM_PUSH_TOKEN" in result.stderr
    assert hub.tip("feature") == before

    result = run_step(script, gitlab_checkout(hub, "run1"), gitlab_env(hub))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "HEAD was detached" in result.stdout
    merged = hub.tip("feature")
    assert run_git(hub.hub, "log", "-1", "--format=%P%n%cn", merged).splitlines() == [
        f"{before} {hub.tip('main')}",
        "Pat Lead",
    ]
    assert_both_kept(hub, "host")
    again = run_step(script, gitlab_checkout(hub, "run2"), gitlab_env(hub))
    assert again.returncode == 0, again.stderr
    assert "already up to date" in again.stdout
    assert hub.tip("feature") == merged

    from_fork = gitlab_env(hub, CI_MERGE_REQUEST_SOURCE_PROJECT_ID="9")
    fork = run_step(script, gitlab_checkout(hub, "run3"), from_fork)
    assert fork.returncode == 0 and "from a fork: left alone" in fork.stdout


def test_gitlab_push_url_carries_the_project_token() -> None:
    (line,) = [x for x in ci.GITLAB_UPDATE_SCRIPT.splitlines() if x.startswith("push_url=")]
    result = run_step(
        line + '\nprintf "%s" "$push_url"',
        Path.cwd(),
        {
            "CI_REPOSITORY_URL": "https://gitlab-ci-token:jobtoken@gitlab.example.com/g/p.git",
            "GITMEM_PUSH_TOKEN": "glpat-abc_123",
        },
    )
    assert result.stdout == "https://oauth2:glpat-abc_123@gitlab.example.com/g/p.git"


def test_ci_init_update_branch_adds_to_what_is_there(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "store")
    cli = Gitmem(store.path, make_runner())
    cli("ci", "init", "--host", "github")
    out = cli("ci", "init", "--host", "github", "--update-branch").stdout
    review = store.path / ci.HOSTS["github"].path
    update = store.path / ci.UPDATE_BRANCH["github"].path
    assert f"unchanged {review}" in out and f"wrote {update}" in out
    workflow = yaml.safe_load(update.read_text())
    # YAML 1.1 reads the key `on` as true; GitHub reads it as "on".
    types = ["opened", "synchronize", "reopened"]
    assert workflow[True] == {"pull_request_target": {"types": types}}
    assert workflow["permissions"] == {"contents": "write"}
    job = workflow["jobs"]["update-branch"]
    assert job["if"] == "github.event.pull_request.head.repo.full_name == github.repository"
    assert "--force" not in ci.GITHUB_UPDATE_STEP and "--force" not in ci.GITLAB_UPDATE_SCRIPT

    cli("ci", "init", "--host", "gitlab")
    cli("ci", "init", "--host", "gitlab", "--update-branch")
    assert (store.path / ".gitlab-ci.yml").read_text() == (
        "include:\n  - local: .gitlab/gitmem-review.yml\n"
        "  - local: .gitlab/gitmem-update-branch.yml\n"
    )
    rules = yaml.safe_load((store.path / ci.UPDATE_BRANCH["gitlab"].path).read_text())[
        "gitmem-update-branch"
    ]["rules"]
    assert rules == [
        {
            "if": '$CI_PIPELINE_SOURCE == "merge_request_event" && '
            "$CI_MERGE_REQUEST_SOURCE_PROJECT_ID == $CI_MERGE_REQUEST_PROJECT_ID"
        }
    ]
    other = tmp_path / "other"
    other.mkdir()
    (other / ".gitlab-ci.yml").write_text("stages: [test]\n")
    out = cli("ci", "init", "--host", "gitlab", "--dir", str(other), "--update-branch").stdout
    assert "{local: .gitlab/gitmem-review.yml}, {local: .gitlab/gitmem-update-branch.yml}" in out
    assert (other / ".gitlab-ci.yml").read_text() == "stages: [test]\n"
