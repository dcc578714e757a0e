"""Nothing committed runs; trust is recorded outside the store; git runs under one policy.

Every program-running git setting gitmem shuts out of an untrusted store is tried
here against the real git binary twice: trusted (the program runs: the test can
fail) and untrusted (it must not). Reproductions 1 and 2 of issue 11 are at the end.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import run_git

from gitmem import gitcmd


def sh(marker: Path) -> str:
    return f"touch {shlex.quote(str(marker))}"


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return str(path)


def make_repo(base: Path) -> Path:
    repo = base / "repo"
    run_git(base, "init", "-q", "-b", "main", "repo")
    (repo / "a.txt").write_text("one\n")
    run_git(repo, "add", "a.txt")
    run_git(repo, "commit", "-qm", "one")
    return repo


def with_hub(repo: Path) -> Path:
    hub = repo.parent / "hub.git"
    run_git(repo.parent, "clone", "-q", "--bare", str(repo), str(hub))
    run_git(repo, "remote", "add", "origin", str(hub))
    return hub


def config(repo: Path, **values: str) -> None:
    for key, value in values.items():
        run_git(repo, "config", key.replace("__", "."), value)


@dataclass(frozen=True)
class Case:
    """Set up a repository whose own settings make ``args`` run the marker command."""

    setup: Callable[[Path, Path], tuple[Path, list[str], bytes | None]]


def _uploadpack(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    with_hub(repo)
    config(repo, remote__origin__uploadpack=f"{sh(m)}; git-upload-pack")
    return repo, ["fetch", "-q", "origin"], None


def _receivepack(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    with_hub(repo)
    config(repo, remote__origin__receivepack=f"{sh(m)}; git-receive-pack")
    return repo, ["push", "-q", "origin", "main:refs/heads/other"], None


def _ssh_command(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    run_git(repo, "remote", "add", "origin", "ssh://git.invalid/x.git")
    config(repo, core__sshCommand=f"{sh(m)}; false")
    return repo, ["fetch", "-q", "origin"], None


def _git_proxy(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    run_git(repo, "remote", "add", "origin", "git://git.invalid/x.git")
    config(repo, core__gitProxy=script(base / "proxy", sh(m)))
    return repo, ["fetch", "-q", "origin"], None


def _ext_protocol(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    run_git(repo, "remote", "add", "origin", f"ext::sh -c {sh(m).replace(' ', '% ')}")
    config(repo, protocol__allow="always", protocol__ext__allow="always")
    return repo, ["fetch", "-q", "origin"], None


def _ext_by_insteadof(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    run_git(repo, "remote", "add", "origin", "https://example.invalid/x.git")
    config(repo, protocol__allow="always")
    run_git(
        repo, "config", f"url.ext::sh -c {sh(m).replace(' ', '% ')} .insteadOf",
        "https://example.invalid/",
    )
    return repo, ["fetch", "-q", "origin"], None


def _hooks_path(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    hooks = base / "hooks"
    hooks.mkdir()
    script(hooks / "post-commit", sh(m))
    config(repo, core__hooksPath=str(hooks))
    return repo, ["commit", "-q", "--allow-empty", "-m", "x"], None


def _repository_hooks(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    """No setting at all: a hook in <gitdir>/hooks (a committed bare store carries one)."""
    repo = make_repo(base)
    with_hub(repo)
    script(repo / ".git" / "hooks" / "pre-push", sh(m))
    return repo, ["push", "-q", "origin", "main:refs/heads/other"], None


def _fsmonitor(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, core__fsmonitor=script(base / "fsmon", f"{sh(m)}; exit 1"))
    return repo, ["status", "--porcelain"], None


def _askpass(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, core__askPass=script(base / "askpass", f"{sh(m)}; echo secret"))
    return repo, ["credential", "fill"], b"protocol=https\nhost=example.invalid\n\n"


def _credential_helper(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, credential__helper=f"!{sh(m)}; echo username=u; echo password=p; true")
    return repo, ["credential", "fill"], b"protocol=https\nhost=example.invalid\n\n"


def _credential_url_helper(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    run_git(
        repo, "config", "credential.https://example.invalid.helper",
        f"!{sh(m)}; echo username=u; echo password=p; true",
    )
    return repo, ["credential", "fill"], b"protocol=https\nhost=example.invalid\n\n"


def _editor(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, core__editor=f"{sh(m)}; true")
    return repo, ["commit", "-q", "--allow-empty"], None


def _sequence_editor(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, sequence__editor=f"{sh(m)}; true")
    return repo, ["rebase", "-q", "-i", "--root"], None


def _alternate_refs(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    (base / "other").mkdir()
    other = make_repo(base / "other")
    repo = base / "repo2"
    run_git(base, "init", "-q", "-b", "main", "repo2")
    (repo / ".git" / "objects" / "info" / "alternates").write_text(
        str(other / ".git" / "objects") + "\n"
    )
    hub = with_hub(other)
    run_git(repo, "remote", "add", "origin", str(hub))
    config(repo, core__alternateRefsCommand=f"{sh(m)}; true")
    return repo, ["fetch", "-q", "origin"], None


def _changed(base: Path, attributes: str | None = None) -> Path:
    repo = make_repo(base)
    if attributes is not None:
        (repo / ".gitattributes").write_text(attributes)
    (repo / "a.txt").write_text("two\n")
    return repo


def _diff_external(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base)
    config(repo, diff__external=script(base / "ext", sh(m)))
    return repo, ["diff"], None


def _diff_command(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base, "a.txt diff=d\n")
    config(repo, diff__d__command=script(base / "dcmd", sh(m)))
    return repo, ["diff"], None


def _textconv(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base, "a.txt diff=d\n")
    config(repo, diff__d__textconv=script(base / "tc", f'{sh(m)}; cat "$1"'))
    return repo, ["diff"], None


def _merge_driver(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    (repo / ".gitattributes").write_text("a.txt merge=d\n")
    (repo / "a.txt").write_text("1\n2\n3\n")
    run_git(repo, "add", ".")
    run_git(repo, "commit", "-qm", "base")
    run_git(repo, "checkout", "-qb", "side")
    (repo / "a.txt").write_text("1\n2\nthree\n")
    run_git(repo, "commit", "-qam", "side")
    run_git(repo, "checkout", "-q", "main")
    (repo / "a.txt").write_text("one\n2\n3\n")
    run_git(repo, "commit", "-qam", "main")
    config(repo, merge__d__driver=f"{sh(m)}; git merge-file %A %O %B")
    return repo, ["merge", "-q", "side", "-m", "merge"], None


def _filter_clean(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base, "a.txt filter=f\n")
    config(repo, filter__f__clean=f"{sh(m)}; cat", filter__f__required="true")
    return repo, ["add", "a.txt"], None


def _filter_smudge(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base, "a.txt filter=f\n")
    config(repo, filter__f__smudge=f"{sh(m)}; cat", filter__f__clean="cat")
    config(repo, filter__f__required="true")
    return repo, ["checkout", "--", "a.txt"], None


def _filter_process(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = _changed(base, "a.txt filter=f\n")
    config(repo, filter__f__process=f"{sh(m)}; false")
    return repo, ["add", "a.txt"], None


def _signing(fmt: str, key: str) -> Callable[[Path, Path], tuple[Path, list[str], bytes | None]]:
    def setup(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
        repo = make_repo(base)
        config(repo, commit__gpgSign="true", gpg__format=fmt, user__signingKey="dummy")
        run_git(repo, "config", key, script(base / "signer", f"{sh(m)}; exit 1"))
        return repo, ["commit", "-q", "--allow-empty", "-m", "x"], None

    return setup


def _ssh_default_key(base: Path, m: Path) -> tuple[Path, list[str], bytes | None]:
    repo = make_repo(base)
    config(repo, commit__gpgSign="true", gpg__format="ssh")
    config(repo, gpg__ssh__defaultKeyCommand=script(base / "keycmd", f"{sh(m)}; exit 1"))
    return repo, ["commit", "-q", "--allow-empty", "-m", "x"], None


EXEC_KEYS: dict[str, Case] = {
    "remote.<name>.uploadpack": Case(_uploadpack),
    "remote.<name>.receivepack": Case(_receivepack),
    "core.sshCommand": Case(_ssh_command),
    "core.gitProxy": Case(_git_proxy),
    "protocol.ext.allow": Case(_ext_protocol),
    "url.<ext::>.insteadOf": Case(_ext_by_insteadof),
    "core.hooksPath": Case(_hooks_path),
    "<gitdir>/hooks": Case(_repository_hooks),
    "core.fsmonitor": Case(_fsmonitor),
    "core.askPass": Case(_askpass),
    "credential.helper": Case(_credential_helper),
    "credential.<url>.helper": Case(_credential_url_helper),
    "core.editor": Case(_editor),
    "sequence.editor": Case(_sequence_editor),
    "core.alternateRefsCommand": Case(_alternate_refs),
    "diff.external": Case(_diff_external),
    "diff.<driver>.command": Case(_diff_command),
    "diff.<driver>.textconv": Case(_textconv),
    "merge.<driver>.driver": Case(_merge_driver),
    "filter.<driver>.clean": Case(_filter_clean),
    "filter.<driver>.smudge": Case(_filter_smudge),
    "filter.<driver>.process": Case(_filter_process),
    "gpg.program": Case(_signing("openpgp", "gpg.program")),
    "gpg.openpgp.program": Case(_signing("openpgp", "gpg.openpgp.program")),
    "gpg.x509.program": Case(_signing("x509", "gpg.x509.program")),
    "gpg.ssh.program": Case(_signing("ssh", "gpg.ssh.program")),
    "gpg.ssh.defaultKeyCommand": Case(_ssh_default_key),
}


@pytest.fixture
def quiet_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No editor, ssh or askpass from the test runner's environment decides anything."""
    for var in ("GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_SSH", "GIT_SSH_COMMAND",
                "GIT_ASKPASS", "SSH_ASKPASS", "GIT_PROXY_COMMAND", "GIT_EXTERNAL_DIFF"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("GIT_SSH", "false")  # were ssh to run untrusted, it would fail at once


@pytest.mark.usefixtures("quiet_env")
@pytest.mark.parametrize("key", sorted(EXEC_KEYS))
def test_each_program_running_setting_runs_only_when_trusted(tmp_path: Path, key: str) -> None:
    outcomes = {}
    for trusted in (True, False):
        base = tmp_path / str(trusted)
        base.mkdir()
        marker = base / "ran"
        repo, args, stdin = EXEC_KEYS[key].setup(base, marker)
        gitcmd.run_git(args, cwd=repo, input=stdin, check=False, timeout=60, trusted=trusted)
        outcomes[trusted] = marker.exists()
    assert outcomes == {True: True, False: False}


@pytest.mark.parametrize(
    ("key", "value"),
    [("alias.fetch", "!{m}"), ("uploadpack.packObjectsHook", "{m}; git pack-objects")],
)
def test_settings_git_itself_ignores_in_a_repository(tmp_path: Path, key: str, value: str) -> None:
    """No override needed: git never lets an alias replace a command, and reads
    uploadpack.packObjectsHook only from the user's own files. Trusted, even."""
    marker = tmp_path / "ran"
    repo = make_repo(tmp_path)
    hub = with_hub(repo)
    run_git(hub, "config", key, value.format(m=sh(marker)))
    run_git(repo, "config", key, value.format(m=sh(marker)))
    (repo / "b.txt").write_text("b\n")
    run_git(hub.parent, "clone", "-q", "--bare", str(repo), "other.git")
    gitcmd.run_git(["fetch", "-q", "origin"], cwd=repo, trusted=True)
    gitcmd.run_git(["fetch", "-q", str(tmp_path / "other.git")], cwd=repo, trusted=True)
    assert not marker.exists()


def test_untrusted_keeps_the_users_own_settings(
    tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A setting the repository overrides falls back to the user's own value, not to nothing:
    the user's credential helper and ssh command still run, the store's do not."""
    monkeypatch.delenv("GIT_SSH_COMMAND", raising=False)
    theirs, mine = tmp_path / "theirs", tmp_path / "mine"
    with (isolated_home / ".gitconfig").open("a") as fh:
        helper = f"!{sh(mine)}; echo username=u; echo password=p; true"
        fh.write(f'[credential]\n\thelper = "{helper}"\n')
    repo = make_repo(tmp_path)
    config(repo, credential__helper=f"!{sh(theirs)}; echo username=x; echo password=y; true")
    result = gitcmd.run_git(
        ["credential", "fill"], cwd=repo, trusted=False,
        input=b"protocol=https\nhost=example.invalid\n\n",
    )
    assert mine.exists() and not theirs.exists()
    assert b"username=u" in result.stdout
    entries = [("global", "core.sshcommand", "my-ssh"), ("local", "core.sshcommand", "evil")]
    assert ("core.sshcommand", "my-ssh") in gitcmd.overrides(entries, {}).config


def test_a_trusted_repository_runs_git_unchanged(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    env = gitcmd.git_env(cwd=repo, trusted=True)
    assert "GIT_CONFIG_COUNT" not in env or env.get("GIT_CONFIG_COUNT") == os.environ.get(
        "GIT_CONFIG_COUNT"
    )
    untrusted = gitcmd.git_env(cwd=repo, trusted=False)
    keys = {untrusted[f"GIT_CONFIG_KEY_{i}"] for i in range(int(untrusted["GIT_CONFIG_COUNT"]))}
    assert {"core.hooksPath", "core.fsmonitor", "protocol.ext.allow"} <= keys


def test_repository_variables_are_dropped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """GIT_DIR from an enclosing git (a hook) never points gitmem's git elsewhere."""
    repo = make_repo(tmp_path)
    other = tmp_path / "other"
    run_git(tmp_path, "init", "-q", "other")
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    out = gitcmd.run_git(["rev-parse", "--absolute-git-dir"], cwd=repo, trusted=True)
    assert Path(out.stdout.decode().strip()) == (repo / ".git").resolve()


def test_missing_git_and_failures_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gitmem.errors import StoreError

    repo = make_repo(tmp_path)
    with pytest.raises(StoreError, match=r"^git cat-file failed: fatal: "):
        gitcmd.run_git(["cat-file", "blob", "nope"], cwd=repo, trusted=True)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(StoreError, match="the git binary is not on PATH"):
        gitcmd.run_git(["status"], cwd=repo, trusted=True)


def test_popen_variant_runs_under_the_same_policy(tmp_path: Path) -> None:
    repo = make_repo(tmp_path)
    marker = tmp_path / "ran"
    config(repo, core__fsmonitor=script(tmp_path / "fsmon", f"{sh(marker)}; exit 1"))
    process = gitcmd.popen_git(["status", "--porcelain"], cwd=repo, trusted=False)
    process.communicate(timeout=60)
    assert process.returncode == 0 and not marker.exists()


def test_every_git_call_goes_through_gitcmd() -> None:
    """No module but gitmem/gitcmd.py starts a process (the one policy has no way around it)."""
    root = Path(__file__).resolve().parent.parent / "gitmem"
    offenders = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "gitcmd.py":
            continue
        text = path.read_text()
        for needle in ("subprocess.run(", "subprocess.Popen(", "os.system(", "check_output("):
            if needle in text:
                offenders.append(f"{path.relative_to(root)}: {needle}")
    assert offenders == []
