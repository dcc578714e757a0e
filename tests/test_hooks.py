"""Git hooks with the real git binary: install, chaining, validation, merges, projects."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from storetools import memory_text

import gitmem
from gitmem import FixedClock, Store
from gitmem.entry import hookrun, team
from gitmem.entry import hooks as gh
from gitmem.format.layout import memory_path
from gitmem.store import mergedriver

REPO_ROOT = Path(__file__).resolve().parent.parent


def git(path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run git in ``path`` (its own cwd, as a person would) with extra environment ``env``."""
    return subprocess.run(
        ["git", *args],
        cwd=path,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "GIT_PAGER": "cat", "LC_ALL": "C", **env},
    )


def ok(path: Path, *args: str) -> str:
    result = git(path, *args)
    assert result.returncode == 0, f"git {args} failed: {result.stderr}"
    return result.stdout


def head(path: Path) -> str:
    return ok(path, "rev-parse", "HEAD").strip()


def write(root: Path, rel: str, text: str) -> None:
    full = root / rel
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(text)


def gitmem_cli(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "gitmem", *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=cwd,
    )


@pytest.fixture
def hooked(store: Store) -> Store:
    gh.install(store.path, "memory")
    return store


# -- memory repository: pre-commit ----------------------------------------------------------

ID = "mem_0a000000-0000-4000-8000-000000000001"
OTHER = "mem_0b000000-0000-4000-8000-000000000002"


@pytest.mark.parametrize(
    ("path", "text", "message"),
    [
        (memory_path(ID), "no front-matter here\n", "has no front-matter"),
        (memory_path(ID), memory_text(ID, extra="version: x\n"), "version"),
        (memory_path(ID), memory_text(OTHER), f"its path says '{ID}'"),
        (memory_path(ID), memory_text(ID, supersedes=OTHER), f"supersedes {OTHER}"),
        (memory_path(ID), "---\nid: [unclosed\n---\n", ""),
        ("memories/zz/stray.md", memory_text(ID), "not at a memory path"),
        ("projects/acme/known_issues.md", "no front-matter here\n", "has no front-matter"),
        ("projects/acme/known_issues.md", memory_text(ID), "its path says 'projects/acme"),
        ("projects/Acme Co/x.md", memory_text(ID), "not at a memory path"),
        (memory_path(ID), memory_text(ID, extra="valid_until: next week\n"), "valid_until"),
        (
            memory_path(ID),
            memory_text(ID, extra="valid_from: 2026-06-01\nvalid_until: 2026-03-01\n"),
            "before valid_from",
        ),
    ],
    ids=[
        "no-front-matter", "schema", "id-path", "dangling-supersedes", "yaml", "stray-path",
        "doc-no-front-matter", "doc-id-path", "doc-bad-segment", "valid-time", "valid-window",
    ],
)
def test_bad_memory_commit_is_refused(hooked: Store, path: str, text: str, message: str) -> None:
    root = hooked.path
    before = head(root)
    write(root, path, text)
    ok(root, "add", "--", path)
    result = git(root, "commit", "-m", "hand edit")
    assert result.returncode != 0
    lines = [line for line in result.stderr.splitlines() if line.startswith("gitmem: refused:")]
    assert len(lines) == 1, result.stderr
    assert path in lines[0]
    assert message in lines[0]
    assert head(root) == before


def test_every_bad_file_gets_its_own_line(hooked: Store) -> None:
    root = hooked.path
    write(root, memory_path(ID), "plain text\n")
    write(root, memory_path(OTHER), memory_text(ID))
    ok(root, "add", "memories")
    result = git(root, "commit", "-m", "two bad")
    assert result.returncode != 0
    refused = [line for line in result.stderr.splitlines() if line.startswith("gitmem: refused:")]
    assert len(refused) == 2
    assert "2 problem(s)" in result.stderr


def test_good_new_memory_commits_unstamped(hooked: Store) -> None:
    root = hooked.path
    text = memory_text(ID)
    write(root, memory_path(ID), text)
    ok(root, "add", "memories")
    ok(root, "commit", "-q", "-m", "by hand")
    assert ok(root, "show", f"HEAD:{memory_path(ID)}") == text
    assert hooked.read(ID).version == 1


def test_hand_edit_is_a_version_and_nothing_is_stamped(hooked: Store) -> None:
    """The commit is the new version (version and updated_at derived from it): the hook
    leaves the file as staged, and a partial commit leaves nothing behind."""
    root = hooked.path
    memory = hooked.create("first body", title="T")
    path = root / memory_path(memory.id)
    before = path.read_text()
    path.write_text(before.replace("first body", "edited body"))
    ok(root, "add", "-A")
    result = git(root, "commit", "-m", "edit by hand")
    assert result.returncode == 0, result.stderr
    assert path.read_text() == before.replace("first body", "edited body")
    now = gitmem.open(root).read(memory.id)
    assert now.body.strip() == "edited body" and now.version == 2
    assert now.created_at == memory.created_at
    assert ok(root, "status", "--porcelain") == ""
    path.write_text(path.read_text().replace("edited", "again"))
    write(root, "other.txt", "x\n")
    ok(root, "add", "other.txt")
    ok(root, "commit", "-qm", "partial", "--", memory_path(memory.id))
    ok(root, "commit", "-qm", "the rest")
    assert gitmem.open(root).read(memory.id).version == 3


def test_a_store_of_an_old_format_refuses_commits(hooked: Store) -> None:
    root = hooked.path
    config = root / "gitmem.yaml"
    config.write_text(config.read_text().replace("format: 6", "format: 4"))
    write(root, memory_path(ID), memory_text(ID))
    ok(root, "add", "-A")
    result = git(root, "commit", "-m", "back to 4")
    assert result.returncode == 1 and "run `gitmem migrate`" in result.stderr


def test_commit_outside_memories_is_untouched(hooked: Store) -> None:
    root = hooked.path
    write(root, "notes.txt", "anything\n")
    ok(root, "add", "notes.txt")
    ok(root, "commit", "-qm", "notes")


# -- install, chaining, uninstall ---------------------------------------------------------------


def _existing_hook(directory: Path, name: str, body: str) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    hook = directory / name
    hook.write_text(f"#!/bin/sh\n{body}\n")
    hook.chmod(0o755)
    return hook


def test_existing_hook_is_chained_and_still_runs(store: Store) -> None:
    root = store.path
    directory = gh.hooks_dir(root)
    marker = root.parent / "marker"
    original = _existing_hook(directory, "pre-commit", f"echo ran >> '{marker}'")
    text = original.read_text()
    gh.install(root, "memory")
    assert (directory / "pre-commit.pre-gitmem").read_text() == text
    write(root, "a.txt", "a\n")
    ok(root, "add", "a.txt")
    ok(root, "commit", "-qm", "a")
    assert marker.read_text() == "ran\n"
    # ours still refuses a bad memory after the chained hook ran
    write(root, memory_path(ID), "bad\n")
    ok(root, "add", "memories")
    assert git(root, "commit", "-qm", "bad").returncode != 0
    assert marker.read_text() == "ran\nran\n"


def test_chained_hook_refusal_stands(store: Store) -> None:
    root = store.path
    _existing_hook(gh.hooks_dir(root), "pre-commit", "echo no >&2; exit 3")
    gh.install(root, "memory")
    write(root, "a.txt", "a\n")
    ok(root, "add", "a.txt")
    before = head(root)
    assert git(root, "commit", "-qm", "a").returncode != 0
    assert head(root) == before


def test_install_twice_is_install_once(store: Store) -> None:
    root = store.path
    directory = gh.hooks_dir(root)
    _existing_hook(directory, "post-merge", "true")
    first = gh.install(root, "memory")
    listing = {p.name: p.read_text() for p in directory.iterdir()}
    second = gh.install(root, "memory")
    assert set(first.changed) == set(gh.MEMORY_HOOKS)
    assert second.changed == []
    assert {p.name: p.read_text() for p in directory.iterdir()} == listing
    assert "gitmem-hook" not in (directory / "post-merge.pre-gitmem").read_text()


def test_uninstall_restores(store: Store) -> None:
    root = store.path
    directory = gh.hooks_dir(root)
    before = {p.name for p in directory.iterdir()}
    original = _existing_hook(directory, "pre-commit", "echo mine")
    text = original.read_text()
    gh.install(root, "memory")
    report = gh.uninstall(root)
    assert set(report.changed) == set(gh.MEMORY_HOOKS)
    assert (directory / "pre-commit").read_text() == text
    assert {p.name for p in directory.iterdir()} == before | {"pre-commit"}
    assert not any(s.installed for s in gh.status(root).hooks)
    assert gh.uninstall(root).changed == []


def test_core_hooks_path_is_respected(store: Store) -> None:
    root = store.path
    ok(root, "config", "core.hooksPath", ".githooks")
    report = gh.install(root, "memory")
    assert report.hooks_dir == (root / ".githooks").resolve()
    assert (root / ".githooks" / "pre-commit").is_file()
    assert not (root / ".git" / "hooks" / "pre-commit").exists()
    write(root, memory_path(ID), "bad\n")
    ok(root, "add", memory_path(ID))
    result = git(root, "commit", "-m", "bad")
    assert result.returncode != 0
    assert "gitmem: refused:" in result.stderr


def test_memory_hooks_in_a_shared_hooks_dir_leave_other_repos_alone(
    store: Store, project: Path, tmp_path: Path
) -> None:
    shared = tmp_path / "shared-hooks"
    for root in (store.path, project):
        ok(root, "config", "core.hooksPath", str(shared))
    gh.install(store.path, "memory")
    write(project, memory_path(ID), "not a memory, just a project file\n")
    ok(project, "add", "memories")
    result = git(project, "commit", "-m", "project file")
    assert result.returncode == 0, result.stderr
    assert "gitmem" not in result.stderr


def test_status_reports(store: Store) -> None:
    root = store.path
    assert not any(s.installed for s in gh.status(root).hooks)
    gh.install(root, "memory")
    report = gh.status(root)
    assert report.role == "memory"
    states = {s.name: s for s in report.hooks}
    assert all(states[name].installed for name in gh.MEMORY_HOOKS)
    assert states["pre-commit"].python == sys.executable
    assert not states["post-commit"].installed


def test_cli_install_status_uninstall(store: Store) -> None:
    result = gitmem_cli("--store", str(store.path), "hooks", "install", "--json")
    assert result.returncode == 0, result.stderr
    assert set(json.loads(result.stdout)["changed"]) == set(gh.MEMORY_HOOKS)
    result = gitmem_cli("--store", str(store.path), "hooks", "status", "--json")
    data = json.loads(result.stdout)
    assert data["role"] == "memory"
    result = gitmem_cli("--store", str(store.path), "hooks", "uninstall")
    assert result.returncode == 0
    assert "removed" in result.stdout


# -- memory repository: post-merge -----------------------------------------------------------


def test_merge_runs_post_merge_catches_up_and_reports_fork(hooked: Store) -> None:
    root = hooked.path
    base = hooked.create("the original", title="T")
    index = hooked.index()
    index.catch_up()
    left = "mem_1a000000-0000-4000-8000-000000000001"
    right = "mem_1b000000-0000-4000-8000-000000000002"
    ok(root, "checkout", "-q", "-b", "side")
    write(root, memory_path(right), memory_text(right, supersedes=base.id))
    ok(root, "add", "memories")
    ok(root, "commit", "-qm", "right")
    ok(root, "checkout", "-q", "main")
    write(root, memory_path(left), memory_text(left, supersedes=base.id))
    ok(root, "add", "memories")
    ok(root, "commit", "-qm", "left")
    result = git(root, "merge", "--no-edit", "side")
    assert result.returncode == 0, result.stderr
    output = result.stdout + result.stderr
    assert f"fork: {base.id} has 2 successors" in output
    assert index.meta().get("commit") == head(root)
    assert {m.id for m in hooked.successors(base.id)} == {left, right}


def test_checkout_catches_index_up(hooked: Store) -> None:
    root = hooked.path
    hooked.create("one", title="T")
    ok(root, "checkout", "-q", "-b", "other")
    result = git(root, "checkout", "-q", "main")
    assert result.returncode == 0
    assert "warning" not in result.stderr
    assert hooked.index().meta().get("commit") == head(root)


def test_framework_post_checkout_reads_refs_from_env(
    hooked: Store, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Under the pre-commit framework post-checkout gets no arguments, only PRE_COMMIT_* refs."""
    root = hooked.path
    base = hooked.create("the original", title="T")
    before = head(root)
    for other in ("mem_1a000000-0000-4000-8000-000000000001", OTHER):
        write(root, memory_path(other), memory_text(other, supersedes=base.id))
    ok(root, "add", "memories")
    ok(root, "commit", "-qm", "two successors")
    monkeypatch.chdir(root)
    monkeypatch.setenv("PRE_COMMIT_FROM_REF", before)
    monkeypatch.setenv("PRE_COMMIT_TO_REF", head(root))
    capsys.readouterr()
    assert hookrun.run("post-checkout", []) == 0
    assert capsys.readouterr().err.splitlines() == [
        f"gitmem: fork: {base.id} has 2 successors: "
        f"{OTHER}, mem_1a000000-0000-4000-8000-000000000001"
    ]


def test_role_is_detected(store: Store, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    ok(plain, "init", "-q")
    assert hookrun.detect_role(store.path) == "memory"
    assert hookrun.detect_role(plain) == "project"


def test_install_into_bare_store(bare_store: Store) -> None:
    report = gh.install(bare_store.path, "memory")
    assert report.hooks_dir == (bare_store.db().gitdir / "hooks").resolve()
    assert all((report.hooks_dir / name).is_file() for name in gh.MEMORY_HOOKS)


# -- project repository ------------------------------------------------------------------------


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    ok(root, "init", "-q")
    write(root, "a.py", "print(1)\n")
    ok(root, "add", "a.py")
    ok(root, "commit", "-qm", "one")
    return root


def _project_workflow(root: Path) -> list[subprocess.CompletedProcess[str]]:
    results = [git(root, "checkout", "-q", "-b", "feature")]
    write(root, "b.py", "print(2)\n")
    ok(root, "add", "b.py")
    results.append(git(root, "commit", "-qm", "two"))
    results.append(git(root, "checkout", "-q", "main"))
    results.append(git(root, "merge", "-q", "--no-edit", "feature"))
    return results


@pytest.mark.parametrize("kind", ["missing", "broken", "healthy"])
def test_project_hooks_never_fail_git(project: Path, kind: str) -> None:
    if kind != "missing":
        store = gitmem.init_project(project)
        store.create("about a.py", title="A")
    if kind == "broken":
        shutil.rmtree(project / ".gitmem" / ".git")
        (project / ".gitmem" / ".git").write_text("gitdir: /nonexistent/store.git\n")
    report = gh.install(project, "project")
    assert set(report.changed) == set(gh.PROJECT_HOOKS)
    for result in _project_workflow(project):
        assert result.returncode == 0, result.stderr
        assert "Traceback" not in result.stderr
        if kind == "broken":
            assert "gitmem: warning:" in result.stderr
        else:
            assert "gitmem: warning" not in result.stderr
    assert (project / "b.py").exists()


def test_project_hook_ignores_git_env(project: Path) -> None:
    store = gitmem.init_project(project)
    store.create("about a.py", title="A")
    gh.install(project, "project")
    result = git(
        project,
        "checkout",
        "-q",
        "-b",
        "x",
        GIT_DIR=str(project / ".git"),
        GIT_WORK_TREE=str(project),
    )
    assert result.returncode == 0
    assert "warning" not in result.stderr


def test_cli_install_project(project: Path) -> None:
    result = gitmem_cli("hooks", "install", "--project", str(project), "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["role"] == "project"
    assert (project / ".git" / "hooks" / "post-commit").is_file()


def test_hook_script_without_gitmem_warns_and_passes(project: Path) -> None:
    gh.install(project, "project", python="/nonexistent/python")
    result = git(project, "commit", "-q", "--allow-empty", "-m", "e", PATH="/usr/bin:/bin")
    assert result.returncode == 0


# -- the pre-commit framework's manifest ---------------------------------------------------------


def test_pre_commit_manifest() -> None:
    hooks = {h["id"]: h for h in yaml.safe_load((REPO_ROOT / ".pre-commit-hooks.yaml").read_text())}
    assert set(hooks) == {"gitmem-validate", "gitmem-post-merge", "gitmem-post-checkout"}
    assert hooks["gitmem-validate"]["stages"] == ["pre-commit"]
    for name in ("post-merge", "post-checkout"):
        hook = hooks[f"gitmem-{name}"]
        assert hook["always_run"] is True
        assert hook["pass_filenames"] is False
        assert hook["stages"] == [name]
        assert name in hook["entry"]


@pytest.mark.slow
def test_pre_commit_framework_try_repo(store: Store, tmp_path: Path) -> None:
    """The manifest works through the real pre-commit framework (installs gitmem into its venv)."""
    pytest.importorskip("pre_commit")
    clone = tmp_path / "gitmem-src"
    ok(tmp_path, "clone", "-q", str(REPO_ROOT), str(clone))  # HEAD, not the work in progress
    root = store.path

    def try_repo() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "try-repo", str(clone), "gitmem-validate"],
            cwd=root,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "PRE_COMMIT_HOME": str(tmp_path / "pre-commit-home")},
        )

    write(root, memory_path(ID), memory_text(OTHER))
    ok(root, "add", "memories")
    bad = try_repo()
    assert bad.returncode != 0, bad.stdout + bad.stderr
    assert f"gitmem: refused: {memory_path(ID)}" in bad.stdout + bad.stderr
    write(root, memory_path(ID), memory_text(ID))
    ok(root, "add", "memories")
    good = try_repo()
    assert good.returncode == 0, good.stdout + good.stderr


# -- memory repository: lifecycle jobs after a merge ---------------------------------------


def _configure_jobs(root: Path, jobs: str) -> None:
    config = root / "gitmem.yaml"
    config.write_text(config.read_text() + f"lifecycle:\n  jobs:\n{jobs}")
    ok(root, "add", "gitmem.yaml")
    ok(root, "commit", "-qm", "configure lifecycle jobs")


def _merge_side_branch(root: Path, hooked: Store, doc_id: str, body: str) -> str:
    """A person edits a document's body on a branch; main moves on;
    the branch is merged with the real git binary."""
    ok(root, "checkout", "-q", "-b", "side")
    path = root / f"{doc_id}.md"
    front, _, _ = path.read_text().partition("\n---\n")
    path.write_text(f"{front}\n---\n{body}")
    ok(root, "add", f"{doc_id}.md")
    ok(root, "commit", "-qm", "hand edit on a branch")
    ok(root, "checkout", "-q", "main")
    hooked.create("unrelated on main\n", title="main side")
    result = git(root, "merge", "--no-edit", "side")
    assert result.returncode == 0, result.stderr
    return result.stdout + result.stderr


def _reviews(n: int) -> str:
    return "".join(f"## Review 2026-01-{i + 1:02d}\n\n- finding {i}\n\n" for i in range(n))


def test_post_merge_runs_the_default_staleness_job(hooked: Store) -> None:
    hooked.create("a memory\n", title="T")
    hooked.create("doc\n", id="projects/acme/notes")
    output = _merge_side_branch(hooked.path, hooked, "projects/acme/notes", "doc v2\n")
    assert "gitmem: staleness: 3 fresh, 0 aging, 0 stale" in output


def test_post_merge_runs_configured_prune_in_its_own_commit(hooked: Store) -> None:
    root = hooked.path
    doc = "projects/acme/review_history"
    hooked.create(_reviews(3), id=doc)
    _configure_jobs(root, "    post-merge: [prune]\n")
    output = _merge_side_branch(root, hooked, doc, _reviews(12))
    assert "gitmem: prune: pruned 2 section(s)" in output
    subject = ok(root, "log", "-1", "--format=%s%n%(trailers:key=Gitmem-Prune,valueonly)")
    assert subject.startswith("prune: lifecycle rules")
    assert subject.count(doc) == 2
    assert hooked.read(doc).body.count("## Review") == 10
    assert hooked.read("projects/acme/review_history_archive").body.count("\n## Review") == 2
    assert ok(root, "status", "--porcelain") == ""


def test_unknown_or_failing_jobs_warn_and_the_merge_stands(hooked: Store) -> None:
    root = hooked.path
    hooked.create("doc\n", id="projects/acme/notes")
    _configure_jobs(root, "    post-merge: [no-such-job, staleness]\n")
    output = _merge_side_branch(root, hooked, "projects/acme/notes", "doc v2\n")
    assert "unknown lifecycle job 'no-such-job'" in output
    assert "gitmem: staleness:" in output
    assert hooked.read("projects/acme/notes").body == "doc v2\n"


def test_jobs_config_is_checked() -> None:
    from gitmem.base.errors import InvalidMemoryError
    from gitmem.entry.jobs import jobs_for
    from gitmem.format.config import PolicyMapping

    assert jobs_for("post-merge", {}) == ["staleness"]
    assert jobs_for("post-checkout", {}) == []
    # A store's file may add jobs, not leave a default out; the user's own settings may.
    assert jobs_for("post-merge", {"lifecycle": {"jobs": {"post-merge": None}}}) == ["staleness"]
    mine = PolicyMapping({}, {"lifecycle": {"jobs": {"post-merge": None}}}, "LOCAL")
    assert jobs_for("post-merge", mine) == []
    assert jobs_for("post-checkout", {"lifecycle": {"jobs": {"post-checkout": ["prune"]}}}) == [
        "prune"
    ]
    with pytest.raises(InvalidMemoryError, match="list of job names"):
        jobs_for("post-merge", {"lifecycle": {"jobs": {"post-merge": "prune"}}})


def test_role_of_a_clone_comes_from_its_committed_config_read_safely(tmp_path: Path) -> None:
    """A clone has no gitmem.* git config; its gitmem.yaml says it is a store. That file comes
    from a remote, so it is read with the hardened loader: an alias bomb is not a store."""
    root = tmp_path / "clone"
    root.mkdir()
    ok(root, "init", "-q")
    (root / "gitmem.yaml").write_text("format: 6\nscope: repo\n")
    assert hookrun.detect_role(root) == "memory"
    (root / "gitmem.yaml").write_text("a: &a [x, x]\nb: &b [*a, *a]\nformat: *b\n")
    assert hookrun.detect_role(root) == "project"
    (root / "gitmem.yaml").write_text("just: a project file\n")
    assert hookrun.detect_role(root) == "project"


# -- memory repository: nothing waits unseen ------------------------------------------------------


@pytest.fixture
def team_clones(tmp_path: Path) -> tuple[Path, Path, Path, str]:
    """A hub holding one memory, and two work-tree clones made by gitmem clone (hooks on)."""
    hub = tmp_path / "hub.git"
    memory = gitmem.init(hub, bare=True).create("one\ntwo\n", title="Shared")
    for name in ("a", "b"):
        team.clone(str(hub), tmp_path / name)
    return hub, tmp_path / "a", tmp_path / "b", memory.id


def _hand_edit_against_a_gitmem_update(a: Path, b: Path, memory_id: str) -> None:
    """A commits a hand edit of line 1; B updates the same line through gitmem an hour
    later (the later side wins the line, so the hand edit is the fork) and syncs."""
    path = a / memory_path(memory_id)
    path.write_text(path.read_text().replace("\none\n", "\nONE-BY-HAND\n"))
    ok(a, "commit", "-qam", "hand edit")
    later = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
    other = gitmem.open(b, clock=FixedClock(later))
    other.update(memory_id, "ONE-BY-GITMEM\ntwo\n")
    other.sync()


@pytest.mark.parametrize("how", ["--rebase", "--no-rebase"])
def test_a_hand_edit_a_git_pull_forks_is_committed_and_pushed(
    team_clones: tuple[Path, Path, Path, str], how: str
) -> None:
    """git pull --rebase drops the hand edit's commit ("patch contents already upstream"):
    the merge driver kept the edit as a fork, which post-rewrite (post-merge for a merge)
    commits before git returns, so a plain git push carries it to the hub."""
    hub, a, b, memory_id = team_clones
    _hand_edit_against_a_gitmem_update(a, b, memory_id)
    result = git(a, "pull", how)
    assert result.returncode == 0, result.stderr
    if how == "--rebase":
        assert "patch contents already upstream" in result.stderr
    assert mergedriver.load_pending(a / ".git") == []
    assert git(a, "status", "--porcelain").stdout == ""
    ok(a, "push", "-q")
    at_hub = gitmem.open(hub)
    bodies = {m.id: m.body for m in at_hub.list()}
    assert bodies.pop(memory_id) == "ONE-BY-GITMEM\ntwo\n"
    assert list(bodies.values()) == ["ONE-BY-HAND\ntwo\n"]  # the fork


def test_status_and_doctor_name_a_fork_left_waiting(
    team_clones: tuple[Path, Path, Path, str],
) -> None:
    """Without the hooks the fork waits in <gitdir>/gitmem/pending-forks/: status and doctor
    name it, and doctor --fix commits it."""
    _, a, b, memory_id = team_clones
    gh.uninstall(a)
    _hand_edit_against_a_gitmem_update(a, b, memory_id)
    ok(a, "pull", "-q", "--rebase")
    [pending] = mergedriver.load_pending(a / ".git")
    fork_id = pending.fork.id
    status = gitmem_cli("--store", str(a), "status", "--json")
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["stores"][0]["pending_forks"] == [fork_id]
    assert fork_id in gitmem_cli("--store", str(a), "status").stdout
    doctor = gitmem_cli("--store", str(a), "doctor")
    assert doctor.returncode == 1 and fork_id in doctor.stdout, doctor.stdout
    fixed = gitmem_cli("--store", str(a), "doctor", "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert mergedriver.load_pending(a / ".git") == []
    assert gitmem.open(a).read(fork_id).body == "ONE-BY-HAND\ntwo\n"
