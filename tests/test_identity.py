"""Who commits: the agent authors, the person running gitmem commits, and git signs.

Hosts' branch rules ("require signed commits", "verified email") look at the committer and
the signature. Commits are made by the user's configured git identity (the agent stays the
author, and in a trailer), and signed when git is set to sign (`commit.gpgsign`, here with
an SSH key made in the test), but only in stores the user trusts. `git verify-commit`, the
real binary, checks the signatures.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from conftest import run_git

import gitmem
from gitmem.git import trust


def tip(store: gitmem.Store) -> str:
    commit = store.db().tip()
    assert commit is not None
    return str(commit.id)


def test_the_user_commits_and_the_agent_authors(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s")
    store.create("a fact", agent="hephaestus")
    commit = store.db().tip()
    assert commit is not None
    assert (commit.committer.name, commit.committer.email) == ("Test User", "test@example.com")
    assert commit.author.name == "hephaestus"
    assert "Gitmem-Agent: hephaestus" in commit.message


def test_without_a_git_identity_gitmem_commits(tmp_path: Path, isolated_home: Path) -> None:
    (isolated_home / ".gitconfig").write_text("[init]\n\tdefaultBranch = main\n")
    store = gitmem.init(tmp_path / "s")
    store.create("a fact")
    commit = store.db().tip()
    assert commit is not None and commit.committer.email == "gitmem@gitmem.invalid"


@pytest.fixture
def signing(isolated_home: Path, tmp_path: Path) -> Path:
    """git set to sign with an SSH key made here; returns the allowed-signers file."""
    key = tmp_path / "key"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "test", "-f", str(key)], check=True
    )
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"test@example.com {(tmp_path / 'key.pub').read_text()}")
    with (isolated_home / ".gitconfig").open("a") as config:
        config.write(
            f"[commit]\n\tgpgsign = true\n[gpg]\n\tformat = ssh\n"
            f"[user]\n\tsigningkey = {key}\n"
            f"[gpg \"ssh\"]\n\tallowedSignersFile = {allowed}\n"
        )
    return allowed


def verified(path: Path, rev: str) -> bool:
    result = subprocess.run(
        ["git", "verify-commit", rev], cwd=path, capture_output=True, text=True
    )
    return result.returncode == 0 and "Good" in result.stderr


def test_commits_are_signed_when_git_signs(tmp_path: Path, signing: Path) -> None:
    store = gitmem.init(tmp_path / "s")
    memory = store.create("signed fact", agent="hephaestus")
    store.update(memory.id, "signed fact, updated", agent="hephaestus")
    for rev in ("HEAD", "HEAD~1"):
        assert verified(tmp_path / "s", rev)
    commit = store.db().tip()
    assert commit is not None and commit.author.name == "hephaestus"
    assert store.read(memory.id).body == "signed fact, updated"
    # Bare stores: signed as well.
    bare = gitmem.init(tmp_path / "b.git", bare=True)
    bare.create("signed in a bare store")
    assert verified(tmp_path / "b.git", "HEAD")


def test_merge_commits_of_sync_are_signed(tmp_path: Path, signing: Path) -> None:
    hub = gitmem.init(tmp_path / "hub.git", bare=True)
    hub.create("shared")
    run_git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), "a")
    run_git(tmp_path, "clone", "-q", str(tmp_path / "hub.git"), "b")
    a, b = gitmem.open(tmp_path / "a"), gitmem.open(tmp_path / "b")
    for store in (a, b):
        trust.trust(store.path)  # clones made with plain git: the user vouches for them
    b.create("from b")
    b.sync()
    a.create("from a")
    assert a.sync().merge == "merge"
    assert verified(tmp_path / "a", "HEAD")


def test_untrusted_stores_are_not_signed(
    tmp_path: Path, signing: Path, caplog: pytest.LogCaptureFixture
) -> None:
    store = gitmem.init(tmp_path / "s")
    trust.untrust(store.path)
    store = gitmem.open(tmp_path / "s")
    store.create("unsigned")
    assert not verified(tmp_path / "s", "HEAD")
    assert "not a trusted store" in caplog.text
