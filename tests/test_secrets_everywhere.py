"""Issue 11, reproduction 5: secrets must not get in through any text a write carries.

Commit messages (``-m``, MCP ``reason``, library ``message=``, transaction messages and
trailers), ids and entity names, every front-matter field (tags, category, unknown keys,
quoted and escaped YAML values), imports, memory-tool files and graph observations. Each
refusal names the kind and where, never the secret; nothing is written. The credentials
are FAKE and assembled at run time (see tests/test_secrets.py).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from clitools import Gitmem, make_runner
from conftest import GitRunner
from storetools import commit_count, plant, tip

from gitmem import Store
from gitmem.base.errors import GitmemError, InvalidIdError
from gitmem.entry.memtool import MemoryTool
from gitmem.features.graph import Graph
from gitmem.features.transfer import import_files
from gitmem.format.secrets import SecretsFoundError, redact, scan_text

GITHUB_PAT = "ghp_" + "aB3dE5fG7hJ9kL1mN3pQ5rS7tU9vW1xY3zA5"
HUGGINGFACE = "hf_" + "kQzRbTnWmXpLvYcJhGfDsAeUiOoPlKjHgF"
NPM = "npm_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SECRETS = (GITHUB_PAT, HUGGINGFACE, NPM)


def _leaks(text: str) -> bool:
    return any(s in text for s in SECRETS) or any(s[4:20] in text for s in SECRETS)


def _refused(call: Any, where: str) -> SecretsFoundError:
    with pytest.raises(SecretsFoundError) as info:
        call()
    error = info.value
    assert where in str(error), str(error)
    assert not _leaks(str(error)) and not _leaks(error.hint)
    return error


def _history(git: GitRunner, store: Store) -> str:
    return git(store.db().gitdir, "log", "-p", "--all", "--format=%H%n%B")


# -- commit messages -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "write",
    [
        lambda s: s.create("fine", message=f"deploy key {GITHUB_PAT}"),
        lambda s: s.update(s.list()[0].id, body="new", message=f"rotated to {HUGGINGFACE}"),
        lambda s: s.delete(s.list()[0].id, message=f"old npm token {NPM}"),
    ],
    ids=["create", "update", "delete"],
)
def test_a_token_in_a_commit_message_is_refused(
    any_store: Store, git: GitRunner, write: Any
) -> None:
    any_store.create("first", title="first")
    before, count = tip(any_store), commit_count(any_store)
    _refused(lambda: write(any_store), "the commit message")
    assert tip(any_store) == before and commit_count(any_store) == count
    assert not _leaks(_history(git, any_store))


def test_transaction_messages_and_trailers_are_scanned(store: Store, git: GitRunner) -> None:
    before = tip(store)
    with pytest.raises(SecretsFoundError), store.transaction(f"batch {GITHUB_PAT}") as tx:
        tx.create("a")
    with (
        pytest.raises(SecretsFoundError),
        store.transaction("batch", trailers=[("Gitmem-Note", NPM)]) as tx,
    ):
        tx.create("b")
    with pytest.raises(SecretsFoundError), store.transaction("batch") as tx:
        tx.create("c")
        tx.trailers.append(("Gitmem-Note", HUGGINGFACE))
    assert tip(store) == before
    assert not _leaks(_history(git, store))


def test_an_explicit_allow_covers_the_message_too(store: Store) -> None:
    with store.secrets_allowed():
        store.create("documented", message=f"the test key {GITHUB_PAT}")
    assert commit_count(store) == 2


def test_the_cli_message_option_is_refused(store: Store, git: GitRunner) -> None:
    gm = Gitmem(store.path, make_runner())
    error = gm.fails(4, "add", "body", "-m", f"token {GITHUB_PAT}")
    assert "commit message" in error and "github-token" in error and not _leaks(error)
    assert commit_count(store) == 1


def test_the_mcp_reason_is_refused(store: Store, git: GitRunner) -> None:
    from gitmem.entry.mcp import call, tools

    memory = store.create("a fact", title="fact")
    specs = {spec.name: spec for spec in tools(store)}
    result, failed = call(
        specs["update_memory"], {"id": memory.id, "content": "b", "reason": f"see {NPM}"}
    )
    assert failed and "npm-token" in result.text and not _leaks(result.text)
    result, failed = call(specs["forget"], {"id": memory.id, "reason": f"see {GITHUB_PAT}"})
    assert failed and not _leaks(result.text)
    assert store.read(memory.id).body == "a fact"
    assert not _leaks(_history(git, store))


# -- ids, names and every front-matter field -------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "where"),
    [
        ({"id": f"note-{GITHUB_PAT}"}, "the id"),
        # Right after ``_``: the credential patterns used to need a non-word character before.
        ({"id": f"mem_{GITHUB_PAT}"}, "the id"),
        ({"title": f"key_{HUGGINGFACE}"}, "front-matter field title"),
        ({"tags": ["ok", f"ci {GITHUB_PAT}"]}, "front-matter field tags[1]"),
        # Over the schema's length bound: the length error used to print the token first.
        ({"tags": [f"{GITHUB_PAT} " + "x" * 300]}, "front-matter field tags[0]"),
        ({"category": f"{NPM} " + "y" * 300}, "front-matter field category"),
        ({"title": f"hf {HUGGINGFACE}"}, "front-matter field title"),
        ({"agent": f"bot {NPM}"}, "front-matter field agent"),
        ({"extra": {"note": HUGGINGFACE}}, "front-matter field note"),
        ({"extra": {"deep": {"list": [1, {"k": NPM}]}}}, "front-matter field deep.list[1].k"),
        ({"extra": {GITHUB_PAT: "value"}}, "a front-matter key"),
        ({"related": [GITHUB_PAT]}, "front-matter field related[0].id"),
    ],
    ids=[
        "id",
        "id-after-underscore",
        "title-after-underscore",
        "tag",
        "long-tag",
        "long-category",
        "title",
        "agent",
        "unknown-key",
        "nested",
        "key",
        "related",
    ],
)
def test_every_field_is_scanned_before_anything_echoes_it(
    any_store: Store, git: GitRunner, fields: dict[str, Any], where: str
) -> None:
    before = tip(any_store)
    _refused(lambda: any_store.create("body", **fields), where)
    assert tip(any_store) == before
    assert not _leaks(_history(git, any_store))


def test_an_id_error_never_prints_the_token(store: Store) -> None:
    # Refused as an id (a path separator) before any scan: the error hierarchy redacts.
    with pytest.raises(InvalidIdError) as info:
        store.read(f"x/{GITHUB_PAT}")
    assert not _leaks(str(info.value)) and "[github-token]" in str(info.value)
    with pytest.raises(GitmemError) as other:
        store.create("b", trigger=f"{HUGGINGFACE}")
    assert not _leaks(str(other.value))


ACME = "ACME-" + "123456"
"""A credential of the store's own kind (its gitmem.yaml), unknown to the built-in patterns."""


def test_a_store_policy_secret_in_a_refused_id_is_not_echoed(store: Store) -> None:
    config = store.db().snapshot().read("gitmem.yaml")
    assert config is not None
    policy = "secrets:\n  patterns:\n    - kind: acme-key\n      regex: 'ACME-\\d{6}'\n"
    plant(store, "gitmem.yaml", config.decode() + policy, "secrets policy")
    kept = store.create("kept")
    before = tip(store)
    # Not a valid id (spaces): the id-syntax error would have printed it whole.
    gm = Gitmem(store.path, make_runner())
    error = gm.fails(4, "add", "b", "--id", f"bad id {ACME}")
    assert "the id" in error and "acme-key" in error and ACME not in error
    for write in (
        lambda: store.create("b", id=f"bad id {ACME}"),
        lambda: store.supersede(kept.id, "b", id=f"bad id {ACME}"),
    ):
        with pytest.raises(SecretsFoundError) as info:
            write()
        assert "acme-key" in str(info.value) and ACME not in str(info.value)
    # An invalid id without a secret still gets the id-syntax error, quoting it.
    with pytest.raises(InvalidIdError, match="bad id ACME-12"):
        store.create("b", id="bad id ACME-12")
    assert tip(store) == before


def test_redact_replaces_each_secret_with_its_kind() -> None:
    text = f"a {GITHUB_PAT} b {NPM} c"
    assert redact(text) == "a [github-token] b [npm-token] c"
    assert redact("nothing here") == "nothing here"


def test_new_kinds_are_found() -> None:
    assert [f.kind for f in scan_text(f"HF_TOKEN={HUGGINGFACE}")] == ["huggingface-token"]
    assert [f.kind for f in scan_text(f"//registry.npmjs.org/:_authToken={NPM}")] == ["npm-token"]


# -- files written by hand: quoted and escaped YAML values -----------------------------------

_ESCAPED = "gh\\x70_" + GITHUB_PAT[4:]
"""The token with its ``p`` as a YAML double-quoted escape: no raw-text scan sees it."""


def _memory_file(memory_id: str, title: str) -> str:
    return (
        f"---\nid: {memory_id}\ntitle: {title}\ncreated_at: 2024-01-01T00:00:00Z\n"
        "updated_at: 2024-01-01T00:00:00Z\nversion: 1\n---\nbody\n"
    )


def test_an_import_with_an_escaped_token_is_refused(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.md").write_text(
        _memory_file("mem_00000000-0000-4000-8000-000000000001", f'"{_ESCAPED}"')
    )
    assert not scan_text((folder / "a.md").read_text())  # the raw text hides it
    before = tip(store)
    with pytest.raises(GitmemError) as info:
        import_files(store, folder)
    message = str(info.value)
    assert "front-matter field title" in message and "github-token" in message
    assert not _leaks(message) and "nothing was imported" in message
    assert tip(store) == before


def test_the_hook_refuses_a_staged_escaped_token(store: Store) -> None:
    from gitmem.entry import hooks as gh

    gh.install(store.path, "memory")
    memory_id = "mem_00000000-0000-4000-8000-000000000002"
    path = f"memories/00/{memory_id}.md"
    full = store.path / path
    full.parent.mkdir(parents=True, exist_ok=True)
    full.write_text(_memory_file(memory_id, f'"{_ESCAPED}"'))
    before = tip(store)
    env = {**os.environ, "LC_ALL": "C"}
    subprocess.run(["git", "-C", str(store.path), "add", "--", path], check=True, env=env)
    result = subprocess.run(
        ["git", "-C", str(store.path), "commit", "-m", "hand edit"],
        capture_output=True,
        text=True,
        check=False,
        env=env,
    )
    assert result.returncode != 0
    assert "github-token" in result.stderr and "front-matter field title" in result.stderr
    assert not _leaks(result.stderr + result.stdout)
    assert tip(store) == before


# -- memory-tool files and graph observations ------------------------------------------------


def test_memory_tool_writes_are_scanned(store: Store, git: GitRunner) -> None:
    tool = MemoryTool(store)
    _refused(lambda: tool.create("/memories/notes.md", f"key {HUGGINGFACE}\n"), "huggingface")
    tool.create("/memories/a.md", "hello\n")
    _refused(lambda: tool.str_replace("/memories/a.md", "hello", NPM), "npm-token")
    _refused(lambda: tool.insert("/memories/a.md", 0, GITHUB_PAT), "github-token")
    # A name the SDK accepts: refused by its commit message or its id, never stored or shown.
    _refused(lambda: tool.create(f"/memories/{GITHUB_PAT}.md", "x"), "github-token")
    # Its transaction message names the new path: refused there, before any write.
    _refused(lambda: tool.rename("/memories/a.md", f"/memories/{NPM}.md"), "npm-token")
    assert not _leaks(_history(git, store))


def test_graph_names_and_observations_are_scanned(store: Store, git: GitRunner) -> None:
    graph = Graph(store)
    graph.create_entities([{"name": "svc", "entityType": "service", "observations": []}])
    _refused(
        lambda: graph.create_entities(
            [{"name": f"svc {GITHUB_PAT}", "entityType": "service", "observations": []}]
        ),
        "github-token",  # its commit message names the entity: refused there or at its id
    )
    # Snake case: the token right after ``_`` (its id and commit subject would carry it).
    _refused(
        lambda: graph.create_entities(
            [{"name": f"svc_{GITHUB_PAT}", "entityType": "service", "observations": []}]
        ),
        "github-token",
    )
    _refused(
        lambda: graph.add_observations([{"entityName": "svc", "contents": [f"key {NPM}"]}]),
        "npm-token",
    )
    _refused(
        lambda: graph.create_relations(
            [{"from": "svc", "to": f"svc {GITHUB_PAT}", "relationType": "uses"}]
        ),
        "github-token",
    )
    assert not _leaks(_history(git, store))
    assert [e["name"] for e in graph.read_graph_dict()["entities"]] == ["svc"]


def test_the_cli_refuses_an_id_with_a_token_after_an_underscore(store: Store) -> None:
    gm = Gitmem(store.path, make_runner())
    error = gm.fails(4, "add", "body", "--id", f"mem_{GITHUB_PAT}")
    assert "the id" in error and "github-token" in error and not _leaks(error)
    assert commit_count(store) == 1


def test_branch_and_remote_names_are_scanned(store: Store, tmp_path: Path) -> None:
    """Issue 38, reproduction 6: ``gitmem --branch ghp_<36> add x`` made the branch and sync
    pushed it. Refused before the branch (or remote) is made, the token never echoed."""
    hub = tmp_path / "hub.git"
    subprocess.run(["git", "init", "-q", "--bare", str(hub)], check=True)
    gm = Gitmem(store.path, make_runner())
    gm("remote", "add", "origin", str(hub))
    for args, where in [
        (["--branch", GITHUB_PAT, "add", "x"], "the branch name"),
        (["--branch", f"proposal/{HUGGINGFACE}", "ls"], "the branch name"),
        (["sync", "--branch", GITHUB_PAT], "the branch name"),
        (["update-branch", "main", "--head", NPM], "the branch name"),
        (["remote", "add", f"fork-{GITHUB_PAT}", str(hub)], "the remote name"),
    ]:
        error = gm.fails(4, *args)
        assert where in error and "token" in error and not _leaks(error), (args, error)
    repo = store.db().repo
    assert not _leaks(" ".join(repo.references)) and not _leaks(" ".join(repo.remotes.names()))
    assert commit_count(store) == 1
    assert store.list() == []


def test_the_mcp_server_refuses_an_entity_named_after_a_token(store: Store, git: GitRunner) -> None:
    from gitmem.entry.mcp import call, tools

    specs = {spec.name: spec for spec in tools(store)}
    entity = {"name": f"svc_{GITHUB_PAT}", "entityType": "service", "observations": []}
    result, failed = call(specs["create_entities"], {"entities": [entity]})
    assert failed and "github-token" in result.text and not _leaks(result.text)
    assert commit_count(store) == 1
    assert not _leaks(_history(git, store))


# -- gitmem secrets --history ----------------------------------------------------------------


def test_history_scan_finds_a_token_after_an_underscore_in_an_id(store: Store) -> None:
    # Stored before the fix (or with --allow-secrets): the id is in the commit subject, the
    # Gitmem-Id trailer and the file; both scans must find it, neither may print it.
    with store.secrets_allowed():
        store.create("body", id=f"mem_{GITHUB_PAT}")
    gm = Gitmem(store.path, make_runner())
    history = gm("secrets", "--history", "--json", code=1)
    assert not _leaks(history.stdout)
    found = {(d["path"], d["kind"]) for d in json.loads(history.stdout)}
    assert ("(commit message)", "github-token") in found
    assert any(path.endswith(".md") and kind == "github-token" for path, kind in found), found
    current = gm("secrets", code=1)
    assert "github-token" in current.stdout and not _leaks(current.stdout)


def test_history_scan_finds_past_blobs_and_messages_once(store: Store, git: GitRunner) -> None:
    plant(store, "notes/ci.txt", f"token {GITHUB_PAT}\n", message="add ci notes")
    first = git(store.path, "rev-parse", "HEAD").strip()
    plant(store, "notes/copy.txt", f"token {GITHUB_PAT}\n", message=f"copy {NPM}")
    second = git(store.path, "rev-parse", "HEAD").strip()
    git(store.path, "rm", "-q", "notes/ci.txt", "notes/copy.txt")
    git(store.path, "commit", "-q", "-m", "remove")
    gm = Gitmem(store.path, make_runner())
    result = gm("secrets", "--history", code=1)
    assert not _leaks(result.stdout)
    rows = [line for line in result.stdout.splitlines() if line]
    # The same blob at two paths is reported once, at the commit that introduced it.
    assert rows == [
        f"{first[:10]} notes/ci.txt:1: github-token: token ghp_******** (history only)",
        f"{second[:10]} (commit message):1: npm-token: copy npm_********",
    ]
    assert gm("secrets", code=0).stdout.strip() == "No credentials found."
    data = json.loads(gm("secrets", "--history", "--json", code=1).stdout)
    assert [(d["commit"], d["path"], d["kind"], d["present"]) for d in data] == [
        (first, "notes/ci.txt", "github-token", False),
        (second, "(commit message)", "npm-token", True),
    ]


# -- what is already stored: reads, doctor and the history scan never print it ---------------


def test_a_stored_file_with_a_token_in_a_bad_field_is_reported_without_it(store: Store) -> None:
    from gitmem.entry import doctor as D

    memory_id = "mem_00000000-0000-4000-8000-000000000003"
    path = f"memories/00/{memory_id}.md"
    text = _memory_file(memory_id, "t").replace(
        "version: 1\n", f"version: 1\ntags: ['{GITHUB_PAT} {'x' * 300}']\n"
    )
    with store.secrets_allowed():
        plant(store, path, text, message="hand edit")
    with pytest.raises(GitmemError) as info:
        gitmem_open(store).read(memory_id)
    assert "too long" in str(info.value) and not _leaks(str(info.value))
    report = D.diagnose(gitmem_open(store), checks=["schema", "secrets"])
    assert report.findings and not any(_leaks(f.message) for f in report.findings)


def test_escaped_tokens_in_stored_fields_are_found_by_doctor_and_history(store: Store) -> None:
    from gitmem.entry import doctor as D

    memory_id = "mem_00000000-0000-4000-8000-000000000004"
    path = f"memories/00/{memory_id}.md"
    plant(store, path, _memory_file(memory_id, f'"{_ESCAPED}"'), message="hand edit")
    (secret,) = [f for f in D.diagnose(gitmem_open(store)).findings if f.check == "secrets"]
    assert "github-token" in secret.message and not _leaks(secret.message)
    from gitmem.entry.secretscan import scan_history

    found = scan_history(gitmem_open(store))
    assert [(f.path, f.finding.kind) for f in found] == [(path, "github-token")]


def gitmem_open(store: Store) -> Store:
    import gitmem

    return gitmem.open(store.path)


def test_the_memory_tool_names_the_line_the_model_wrote(store: Store) -> None:
    tool = MemoryTool(store)
    error = _refused(
        lambda: tool.create("/memories/notes.md", f"one\ntwo\nkey {HUGGINGFACE}\n"), "huggingface"
    )
    assert str(error).startswith("/memories/notes.md was not changed")
    assert "on line 3" in str(error)  # the third line of what the model wrote
