"""The CI recipes of `gitmem ci init`, run locally as the host would run their review step.

A team store is pushed to a bare hub; a clone proposes a branch with 500 changed memories,
one carrying a credential and one broken file. The GitHub workflow's review step and the
GitLab job's script (the very text the recipes hold) then run in that clone with the
variables each host sets, and must leave a comment within the host's limit that shows every
problem first, never repeats the credential, and a full report beside it.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml
from clitools import Gitmem, make_runner, run_step

import gitmem
from gitmem.base.clock import FixedClock
from gitmem.entry import ci

FAKE_KEY = "AKIA" + "ZXCVBNMASDFGHJKL"
CHANGED = 500


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


@pytest.fixture
def proposal(tmp_path: Path) -> Path:
    """A clone of a hub on branch ``proposal``: 500 changed memories, a secret, a broken file."""
    root = tmp_path
    clock = FixedClock("2026-11-22T10:00:00Z")
    team = gitmem.init(root / "team", clock=clock)
    with team.transaction(message="seed"):
        ids = [
            team.create(f"Fact {i}.\nSecond line.\n", title=f"fact {i}", agent="seeder").id
            for i in range(CHANGED)
        ]
    git(root, "clone", "-q", "--bare", str(root / "team"), "hub.git")
    git(root, "clone", "-q", str(root / "hub.git"), "work")
    work = root / "work"
    git(work, "checkout", "-q", "-b", "proposal")
    store = gitmem.open(work, clock=clock)
    with store.transaction(message="rewrite every fact"):
        for i, memory_id in enumerate(ids):
            store.update(memory_id, f"Fact {i}, corrected.\nSecond line.\n", agent="editor")
    with store.secrets_allowed():
        store.create(f"Deploy with the key {FAKE_KEY}.", title="deploy key", agent="careless")
    broken = work / "memories" / "ff" / "mem_ff000000-0000-4000-8000-0000000000ff.md"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text("---\nid: [broken\n---\nbody\n")
    git(work, "add", str(broken))
    git(work, "commit", "-q", "--no-verify", "-m", "a broken file")
    return work


def check_comment(work: Path, limit: int) -> str:
    comment = (work / "gitmem-review.md").read_text()
    full = (work / "gitmem-review-full.md").read_text()
    assert len(comment) <= limit
    assert comment.startswith("## gitmem review")
    assert f"{CHANGED + 2} memories changed" in comment.splitlines()[2]
    # Every problem is in the comment, before any table row, and the key never is.
    problems = comment.index("### Problems")
    assert comment.index("**secret**") > problems
    assert comment.index("**invalid**") > problems
    assert FAKE_KEY not in comment and FAKE_KEY not in full
    if len(full) > limit:
        assert "Cut to fit" in comment and "not shown here" in comment
    assert full.count("<details>") == CHANGED + 2
    return comment


@pytest.mark.slow
def test_review_steps_of_both_hosts(proposal: Path, tmp_path: Path) -> None:
    """GitHub's step, then GitLab's script, on the same proposal branch."""
    output = tmp_path / "github-output"
    result = run_step(
        ci.GITHUB_REVIEW_STEP, proposal, {"GITHUB_BASE_REF": "main", "GITHUB_OUTPUT": str(output)}
    )
    assert result.returncode == 0, result.stderr
    assert output.read_text().strip() == "status=8"  # problems found: the gate step fails
    comment = check_comment(proposal, ci.GITHUB_LIMIT)
    assert len(comment) > ci.GITHUB_LIMIT // 2  # filled, not emptied, by the cut

    result = run_step(
        ci.GITLAB_SCRIPT, proposal, {"CI_MERGE_REQUEST_TARGET_BRANCH_NAME": "main"}
    )
    assert result.returncode == 8, result.stderr
    check_comment(proposal, ci.GITLAB_LIMIT)


def test_recipes_hold_the_step_the_suite_runs() -> None:
    workflow = yaml.safe_load(ci.HOSTS["github"].text)
    steps = workflow["jobs"]["review"]["steps"]
    review = next(step for step in steps if step.get("id") == "review")
    assert review["run"] == ci.GITHUB_REVIEW_STEP
    # YAML 1.1 reads the key `on` as true; GitHub reads it as "on".
    assert workflow.get("on", workflow.get(True)) == "pull_request"
    job = yaml.safe_load(ci.HOSTS["gitlab"].text)["gitmem-review"]
    assert job["script"] == [ci.GITLAB_SCRIPT]
    assert set(job["artifacts"]["paths"]) == {"gitmem-review.md", "gitmem-review-full.md"}


def test_ci_init_writes_and_refuses_to_overwrite(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "store")
    cli = Gitmem(store.path, make_runner())
    out = cli("ci", "init", "--host", "github").stdout
    target = store.path / ".github" / "workflows" / "gitmem-review.yml"
    assert f"wrote {target}" in out
    assert target.read_text() == ci.HOSTS["github"].text
    # The same text again is left alone; a file someone changed is not replaced unasked.
    assert f"unchanged {target}" in cli("ci", "init", "--host", "github").stdout
    target.write_text("edited")
    assert "already exists" in cli.fails(5, "ci", "init", "--host", "github")
    cli("ci", "init", "--host", "github", "--force")
    assert target.read_text() == ci.HOSTS["github"].text

    out = cli("ci", "init", "--host", "gitlab").stdout
    include = "include:\n  - local: .gitlab/gitmem-review.yml\n"
    assert (store.path / ".gitlab-ci.yml").read_text() == include
    assert "add to .gitlab-ci.yml" not in out
    other = tmp_path / "other"
    other.mkdir()
    (other / ".gitlab-ci.yml").write_text("stages: [test]\n")
    out = cli("ci", "init", "--host", "gitlab", "--dir", str(other)).stdout
    assert "add to .gitlab-ci.yml" in out
    assert (other / ".gitlab-ci.yml").read_text() == "stages: [test]\n"


def test_max_chars_cuts_markdown_only(tmp_path: Path) -> None:
    from gitmem.features import review as reviewing

    store = gitmem.init(tmp_path / "s")
    base = store.db().tip()
    assert base is not None
    for i in range(60):
        store.create(f"line {i}\n" * 30, title=f"m{i}")
    result = reviewing.review(store, f"{base.id}..HEAD")
    whole = reviewing.render(result)
    cut = reviewing.render(result, max_chars=4096)
    assert len(whole) > 4096 >= len(cut)
    assert cut.startswith(whole[: whole.index("### Problems")])
    assert "change detail(s)" in cut.splitlines()[-1]
    assert reviewing.render(result, "json", max_chars=4096) == reviewing.render(result, "json")
    with pytest.raises(gitmem.InvalidInputError, match="at least 1024"):
        reviewing.render(result, max_chars=10)
