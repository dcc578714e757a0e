"""The hub's pre-receive hook (`gitmem hooks install --server`), with real pushes.

A bare hub gets the hook; clones push to it with the git binary. Pushes of valid memories
land; a push with a broken memory, a credential in any commit it brings (even one a later
commit removed) or in a commit message is refused whole and the hub's branch stays put.
"""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from clitools import Gitmem, make_runner
from conftest import run_git
from test_policy import KEYS, NONE, commit_config, merge

import gitmem
from gitmem.entry import hooks, receive
from gitmem.format.config import collecting_loosened

FAKE_TOKEN = "ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8"


@pytest.fixture
def hub(tmp_path: Path) -> Path:
    seed = gitmem.init(tmp_path / "seed")
    seed.create("a fact", title="fact")
    run_git(tmp_path, "clone", "-q", "--bare", str(tmp_path / "seed"), "hub.git")
    hub = tmp_path / "hub.git"
    report = hooks.install(hub, "server")
    assert report.changed == ["pre-receive"]
    return hub


def clone(tmp_path: Path, hub: Path, name: str) -> Path:
    run_git(tmp_path, "clone", "-q", str(hub), name)
    return tmp_path / name


def push(work: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["git", "push", "-q", "origin", "main"], cwd=work, capture_output=True, text=True
    )


def hub_tip(hub: Path) -> str:
    return run_git(hub, "rev-parse", "main").strip()


def commit_file(work: Path, path: str, text: str, message: str = "hand edit") -> None:
    (work / path).parent.mkdir(parents=True, exist_ok=True)
    (work / path).write_text(text)
    run_git(work, "add", path)
    run_git(work, "commit", "-q", "--no-verify", "-m", message)


def test_valid_pushes_land(hub: Path, tmp_path: Path) -> None:
    work = clone(tmp_path, hub, "a")
    store = gitmem.open(work)
    store.create("another fact", title="another")
    assert store.sync().pushed
    assert hub_tip(hub) == run_git(work, "rev-parse", "main").strip()


def test_a_broken_memory_is_refused(hub: Path, tmp_path: Path) -> None:
    work = clone(tmp_path, hub, "a")
    before = hub_tip(hub)
    path = "memories/ab/mem_ab000000-0000-4000-8000-000000000000.md"
    commit_file(work, path, "---\nid: [x\n---\n")
    result = push(work)
    assert result.returncode != 0
    assert "gitmem: refused: refs/heads/main: memories/ab/" in result.stderr
    assert hub_tip(hub) == before


def test_a_credential_anywhere_in_the_push_is_refused(hub: Path, tmp_path: Path) -> None:
    work = clone(tmp_path, hub, "a")
    before = hub_tip(hub)
    store = gitmem.open(work)
    with store.secrets_allowed():
        leaked = store.create(f"token {FAKE_TOKEN}", title="oops")
    store.update(leaked.id, "token removed")  # the tip is clean; history is not
    result = push(work)
    assert result.returncode != 0 and "holds a credential (github" in result.stderr
    assert FAKE_TOKEN not in result.stderr
    assert hub_tip(hub) == before
    # A credential in a commit message only.
    other = clone(tmp_path, hub, "b")
    commit_file(other, "notes.txt", "not a memory", message=f"deploy with {FAKE_TOKEN}")
    result = push(other)
    assert result.returncode != 0 and "message holds a credential" in result.stderr
    assert hub_tip(hub) == before


def test_a_credential_hidden_by_a_yaml_escape_is_refused(hub: Path, tmp_path: Path) -> None:
    # The token's "p" as a double-quoted escape: no scan of the raw text sees it.
    work = clone(tmp_path, hub, "a")
    before = hub_tip(hub)
    memory_id = "mem_ab000000-0000-4000-8000-000000000001"
    title = '"gh\\x70_' + FAKE_TOKEN[4:] + '"'
    text = f"---\nid: {memory_id}\ntitle: {title}\ncreated_at: 2024-01-01T00:00:00Z\n---\nbody\n"
    commit_file(work, f"memories/ab/{memory_id}.md", text)
    result = push(work)
    assert result.returncode != 0 and "holds a credential (github" in result.stderr
    assert FAKE_TOKEN[4:] not in result.stderr
    assert hub_tip(hub) == before


def test_an_existing_hook_still_runs_first(hub: Path, tmp_path: Path) -> None:
    hooks.uninstall(hub)
    script = hub / "hooks" / "pre-receive"
    script.write_text("#!/bin/sh\ncat > \"$(dirname \"$0\")/../seen-by-old-hook\"\n")
    script.chmod(0o755)
    hooks.install(hub, "server")
    work = clone(tmp_path, hub, "a")
    gitmem.open(work).create("fine")
    assert push(work).returncode == 0
    assert "refs/heads/main" in (hub / "seen-by-old-hook").read_text()


def test_cli_install_server(tmp_path: Path) -> None:
    run_git(tmp_path, "init", "-q", "--bare", "h.git")
    cli = Gitmem(None, make_runner())
    out = cli("hooks", "install", "--server", str(tmp_path / "h.git")).stdout
    assert "pre-receive" in out
    status = cli.json("hooks", "status", "--server", str(tmp_path / "h.git"))
    assert [h["role"] for h in status["hooks"] if h["name"] == "pre-receive"] == ["server"]


# -- a gitmem.yaml that loosens policy (tests/test_policy.py walks the keys in a clone) ------


@pytest.mark.slow
def test_reproduction_the_hub_refuses_a_push_that_loosens_policy(
    hub: Path, tmp_path: Path
) -> None:
    """The hook refused the token alone but took it when the same push carried the
    allow-list commit; now a push whose gitmem.yaml loosens is refused whatever it holds."""
    work = clone(tmp_path, hub, "a")
    before = run_git(hub, "rev-parse", "main").strip()
    with (work / "gitmem.yaml").open("a") as fh:
        fh.write("secrets:\n  allow: ['.*']\n")
    run_git(work, "commit", "-q", "-am", "allow")
    store = gitmem.open(work)
    with store.secrets_allowed():
        store.create(f"deploy with {FAKE_TOKEN}")
    result = push(work)
    assert result.returncode != 0
    assert "gitmem.yaml secrets.allow allows what looks like a credential" in result.stderr
    assert "holds a credential (github-token)" in result.stderr
    assert FAKE_TOKEN not in result.stderr
    # The allow-list alone.
    run_git(work, "reset", "-q", "--hard", "HEAD~1")
    result = push(work)
    assert result.returncode != 0 and "secrets.allow" in result.stderr
    assert run_git(hub, "rev-parse", "main").strip() == before


@pytest.mark.slow
def test_the_hub_refuses_a_malformed_secrets_section(hub: Path, tmp_path: Path) -> None:
    """Its shape is the config schema's: refused before any pattern of it is used."""
    work = clone(tmp_path, hub, "a")
    with (work / "gitmem.yaml").open("a") as fh:
        fh.write("secrets:\n  patterns:\n    - {kind: Bad Kind, regex: x}\n")
    run_git(work, "commit", "-q", "-am", "a broken policy")
    result = push(work)
    assert result.returncode != 0
    assert "secrets.patterns.0.kind" in result.stderr


@pytest.mark.slow
def test_the_hub_walks_every_key(hub: Path, tmp_path: Path) -> None:
    """Each loosening value alone is named by the hook's check; a push of all of them is
    refused naming each; a push of every tightening one lands."""
    work = clone(tmp_path, hub, "a")
    store = gitmem.open(work)
    before = run_git(hub, "rev-parse", "main").strip()
    loosen = [key for key in KEYS if key.loosen is not NONE]
    for key in loosen:
        data = yaml.safe_load((work / "gitmem.yaml").read_text())
        merge(data, key.config(key.loosen))
        found = receive.loosening(yaml.safe_dump(data))
        assert [f for f in found if f.startswith(f"gitmem.yaml {key.path} ")], (key.path, found)
    loosened: dict[str, Any] = {}
    for key in loosen:
        merge(loosened, key.config(key.loosen))
    commit_config(store, loosened)
    result = push(work)
    assert result.returncode != 0
    for key in loosen:
        assert f"gitmem.yaml {key.path} " in result.stderr, (key.path, result.stderr)
    run_git(work, "reset", "-q", "--hard", "origin/main")
    assert run_git(hub, "rev-parse", "main").strip() == before
    everything: dict[str, Any] = {}
    for key in KEYS:
        if key.tighten is not NONE:
            merge(everything, key.config(key.tighten))
    commit_config(store, everything)
    result = push(work)
    assert result.returncode == 0, result.stderr
    # And a clone reads every tightened value with no warning.
    with collecting_loosened() as found:
        config = gitmem.open(work).config()
        for key in KEYS:
            key.read(config)
    assert found == []
