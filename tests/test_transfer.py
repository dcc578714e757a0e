"""Import and export: the reference server's memory.jsonl and memory files, written in the
tests the way their tools write them, with fidelity reports and round trips."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

import gitmem
from gitmem import FixedClock, InvalidInputError, Scope, Store
from gitmem.features.graph import Graph
from gitmem.features.transfer import (
    export_files,
    export_mcp_jsonl,
    import_files,
    import_forge,
    import_mcp_jsonl,
    parse_mcp_jsonl,
)
from tests.clitools import Gitmem, make_runner
from tests.storetools import commit_count, entity, run_git

ENTITIES = [
    {"name": "Alice", "entityType": "person", "observations": ["works at Acme Corp", "likes ☕"]},
    {"name": "Acme Corp", "entityType": "company", "observations": []},
    {"name": "Bob", "entityType": "person", "observations": ["two\nlines", " padded "]},
]
RELATIONS = [
    {"from": "Alice", "to": "Acme Corp", "relationType": "works_at"},
    {"from": "Bob", "to": "Alice", "relationType": "knows"},
    {"from": "Carol", "to": "Bob", "relationType": "mentors"},
]


def reference_jsonl(entities: list[dict[str, Any]], relations: list[dict[str, Any]]) -> str:
    """memory.jsonl as the reference server's saveGraph writes it: JSON.stringify of each
    entity then each relation, joined by newlines, no newline at the end."""
    lines = [
        json.dumps(
            {"type": "entity", "name": e["name"], "entityType": e["entityType"],
             "observations": e["observations"]},
            ensure_ascii=False, separators=(",", ":"),
        )
        for e in entities
    ] + [
        json.dumps(
            {"type": "relation", "from": r["from"], "to": r["to"],
             "relationType": r["relationType"]},
            ensure_ascii=False, separators=(",", ":"),
        )
        for r in relations
    ]  # fmt: skip
    return "\n".join(lines)


@pytest.fixture
def jsonl(tmp_path: Path) -> Path:
    path = tmp_path / "memory.jsonl"
    path.write_text(reference_jsonl(ENTITIES, RELATIONS), encoding="utf-8")
    return path


def graph_dict(store: Store) -> dict[str, Any]:
    g = Graph(store).read_graph().to_dict()
    return {
        "entities": sorted(g["entities"], key=lambda e: e["name"]),
        "relations": sorted(g["relations"], key=lambda r: (r["from"], r["to"])),
    }


EXPECTED = {
    "entities": sorted(ENTITIES, key=lambda e: e["name"]),
    "relations": sorted(RELATIONS, key=lambda r: (r["from"], r["to"])),
}


# -- mcp-jsonl -----------------------------------------------------------------------------------


def test_import_reference_jsonl_is_one_commit_with_a_clean_fidelity_report(
    any_store: Store, jsonl: Path
) -> None:
    before = commit_count(any_store)
    seen: list[tuple[int, int]] = []
    report = import_mcp_jsonl(any_store, jsonl, progress=lambda d, t: seen.append((d, t)))
    assert commit_count(any_store) == before + 1
    assert report.ok, report.mismatches
    assert report.read == {"entities": 3, "relations": 3}
    assert report.written["entities"] == 3 and report.written["relations"] == 3
    assert report.checked == 6 and report.skipped == []
    assert graph_dict(any_store) == EXPECTED
    assert seen[-1] == (6, 6)
    log = any_store.log(limit=5)
    assert any(e.subject == "import mcp-jsonl: memory.jsonl" for e in log)


def test_large_inputs_are_imported_in_batches(store: Store, tmp_path: Path) -> None:
    entities = [{"name": f"E{i}", "entityType": "t", "observations": [str(i)]} for i in range(7)]
    relations = [{"from": f"E{i}", "to": f"E{i + 1}", "relationType": "next"} for i in range(6)]
    path = tmp_path / "big.jsonl"
    path.write_text(reference_jsonl(entities, relations))
    before = commit_count(store)
    seen: list[int] = []
    report = import_mcp_jsonl(store, path, batch_size=3, progress=lambda d, t: seen.append(d))
    assert report.ok and report.checked == 13
    assert commit_count(store) == before + 5  # 3 + 3 + 1 entities, then 3 + 3 relations
    assert report.notes == ["13 entries imported in 5 commits of at most 3"]
    assert seen == [3, 6, 7, 10, 13]
    assert len(Graph(store).read_graph().relations) == 6


@pytest.mark.parametrize(
    "variant",
    [
        lambda t: t + "\n",
        lambda t: t.replace("\n", "\r\n"),
        lambda t: "\n" + t.replace("\n", "\n\n  \n") + "\n\n",
        lambda t: "\ufeff" + t,
    ],
)
def test_trailing_newlines_blank_lines_and_crlf_are_fine(
    store: Store, jsonl: Path, variant: Any
) -> None:
    jsonl.write_text(variant(jsonl.read_text()))
    assert import_mcp_jsonl(store, jsonl).ok
    assert graph_dict(store) == EXPECTED


def test_a_corrupt_line_is_named_and_nothing_is_imported(store: Store, jsonl: Path) -> None:
    lines = jsonl.read_text().split("\n")
    lines.insert(2, '{"type":"entity","name":"Broken",')
    lines.insert(4, '{"type":"entity","name":"NoObs","entityType":"x"}')
    lines.insert(5, '{"type":"thing"}')
    jsonl.write_text("\n".join(lines))
    before = commit_count(store)
    with pytest.raises(
        InvalidInputError, match=r"line 3: not JSON .*and 2 more bad lines.*nothing"
    ):
        import_mcp_jsonl(store, jsonl)
    assert commit_count(store) == before
    report = import_mcp_jsonl(store, jsonl, skip_bad=True)
    assert report.ok
    assert report.skipped == [
        "line 3: not JSON (Expecting property name enclosed in double quotes at column 34)",
        "line 5: entity: 'observations' is a required property",
        "line 6: type is 'thing', not 'entity' or 'relation'",
    ]
    assert graph_dict(store) == EXPECTED


def test_duplicates_and_entities_already_in_the_store(store: Store, tmp_path: Path) -> None:
    Graph(store).create_entities(
        [{"name": "Alice", "entityType": "human", "observations": ["known before"]}]
    )
    path = tmp_path / "dup.jsonl"
    path.write_text(
        reference_jsonl(
            [*ENTITIES, {"name": "Bob", "entityType": "person", "observations": ["again"]}],
            [*RELATIONS, RELATIONS[0]],
        )
    )
    report = import_mcp_jsonl(store, path)
    assert report.ok, report.mismatches
    assert "line 4: entity 'Bob' appears again; its observations were merged into the first" in (
        report.skipped
    )
    assert "line 8: the same relation again" in report.skipped
    assert any("already in the store as type 'human'" in s for s in report.skipped)
    g = {e.name: e for e in Graph(store).read_graph().entities}
    assert g["Alice"].entity_type == "human"
    assert g["Alice"].observations == ("known before", "works at Acme Corp", "likes ☕")
    assert g["Bob"].observations == ("two\nlines", " padded ", "again")


def test_export_writes_what_the_reference_server_reads(
    store: Store, jsonl: Path, tmp_path: Path
) -> None:
    import_mcp_jsonl(store, jsonl)
    out = tmp_path / "out.jsonl"
    text, report = export_mcp_jsonl(store, out)
    assert report.ok and report.checked == 6
    assert out.read_text(encoding="utf-8") == text
    assert not text.endswith("\n")
    lines = text.split("\n")
    # Every line is exactly one the reference server would have written for that item.
    assert sorted(lines) == sorted(reference_jsonl(ENTITIES, RELATIONS).split("\n"))
    assert [json.loads(line)["type"] for line in lines] == ["entity"] * 3 + ["relation"] * 3
    entries, bad = parse_mcp_jsonl(text)
    assert bad == [] and len(entries) == 6


def test_mcp_jsonl_round_trip_is_stable(tmp_path: Path, jsonl: Path, clock: FixedClock) -> None:
    first = gitmem.init(tmp_path / "one", clock=clock)
    import_mcp_jsonl(first, jsonl)
    text1, _ = export_mcp_jsonl(first, tmp_path / "1.jsonl")
    second = gitmem.init(tmp_path / "two", clock=clock)
    assert import_mcp_jsonl(second, tmp_path / "1.jsonl").ok
    text2, _ = export_mcp_jsonl(second, tmp_path / "2.jsonl")
    assert text1 == text2
    assert graph_dict(second) == EXPECTED


def test_awkward_content_survives_the_round_trip(store: Store, tmp_path: Path) -> None:
    odd = [
        {"name": "東京", "entityType": "city", "observations": ["", "\u2028", "tab\there", '"q"']},
        {"name": "", "entityType": "", "observations": ["nul \u0000 in it", "cr\r\nlf"]},
        {"name": "../../etc", "entityType": "path/ish", "observations": ["- dash"]},
    ]
    path = tmp_path / "odd.jsonl"
    path.write_text(reference_jsonl(odd, [{"from": "", "to": "東京", "relationType": "→"}]))
    report = import_mcp_jsonl(store, path)
    assert report.ok, report.mismatches
    text, report = export_mcp_jsonl(store, "-")
    assert report.ok
    assert sorted(text.split("\n")) == sorted(path.read_text().split("\n"))


# -- files ---------------------------------------------------------------------------------------


def mem_file(mid: str, body: str, **fields: Any) -> str:
    """A long-term-memory file as another tool (or person) wrote it."""
    meta = {
        "id": mid,
        "title": fields.pop("title", "t"),
        "created_at": "2025-01-02T03:04:05Z",
        "updated_at": fields.pop("updated_at", "2025-02-03T04:05:06Z"),
        "version": fields.pop("version", 1),
        **fields,
    }
    head = "".join(f"{k}: {v}\n" for k, v in meta.items())
    return f"---\n{head}custom_key: kept as is  # a comment\n---\n\n{body}"


OLD = "mem_0a9d0000-0000-4000-8000-000000000001"
NEW = "mem_5f0c0000-0000-4000-8000-000000000002"
USERS = "mem_77e10000-0000-4000-8000-000000000003"


@pytest.fixture
def files_dir(tmp_path: Path) -> Path:
    root = tmp_path / "ltm"
    (root / "repo").mkdir(parents=True)
    (root / "user").mkdir()
    (root / "repo" / f"{OLD}.md").write_text(mem_file(OLD, "Use setUp.\n", version=3))
    (root / "repo" / f"{NEW}.md").write_text(
        mem_file(NEW, "Use fixtures.\n", version=4, supersedes=OLD)
    )
    (root / "user" / f"{USERS}.md").write_text(mem_file(USERS, "Likes tabs.", scope="user"))
    (root / "repo" / "notes.txt").write_text("not a memory")
    return root


def test_import_files_keeps_ids_times_and_supersedes(store: Store, files_dir: Path) -> None:
    """An imported memory keeps its created_at; its version and updated_at are its history
    here (the import commit), and the file's lines for them are dropped."""
    before = commit_count(store)
    report = import_files(store, files_dir)
    assert report.ok, report.mismatches
    assert report.read == {"files": 3} and report.written == {"files": 3}
    assert commit_count(store) == before + 1  # this store has one scope: everything lands here
    new = store.read(NEW)
    assert new.version == 1 and new.supersedes == OLD
    assert new.updated_at == store.clock.now()
    assert new.created_at.isoformat() == "2025-01-02T03:04:05+00:00"
    assert new.extra["custom_key"] == "kept as is"
    assert [v.memory_id for v in store.history(NEW)][-1:] == [NEW]
    assert OLD in {v.memory_id for v in store.history(NEW)}
    source = (files_dir / "repo" / f"{NEW}.md").read_text()
    kept = "".join(
        line for line in source.splitlines(keepends=True)
        if not line.startswith(("version:", "updated_at:"))
    )
    assert (store.path / "memories/5f" / f"{NEW}.md").read_text() == kept
    # Importing the same files again changes nothing.
    again = import_files(store, files_dir)
    assert again.written == {"files": 0} and again.unchanged == {"files": 3}
    assert commit_count(store) == before + 1


def test_import_files_sorts_repo_and_user_folders_into_their_scopes(
    tmp_path: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch, files_dir: Path
) -> None:
    monkeypatch.chdir(tmp_path)
    gitmem.open(clock=clock)  # makes the user store
    project = tmp_path / "project"
    project.mkdir()
    run_git(project, "init", "-q")
    gitmem.init_project(project, clock=clock)
    monkeypatch.chdir(project)
    store = gitmem.open(clock=clock)
    assert store.scopes == [Scope.REPO, Scope.USER]
    report = import_files(store, files_dir)
    assert report.ok
    assert store.read(USERS).store_scope is Scope.USER
    assert store.read(NEW).store_scope is Scope.REPO


def test_bad_or_conflicting_files_stop_the_import_unless_skipped(
    store: Store, files_dir: Path
) -> None:
    (files_dir / "repo" / "broken.md").write_text("---\nid: [x\n---\n")
    (files_dir / "repo" / "noid.md").write_text("---\ntitle: x\n---\n\nbody")
    store.create("already here", id=USERS)
    before = commit_count(store)
    with pytest.raises(InvalidInputError, match=r"and 2 more\); nothing was imported"):
        import_files(store, files_dir)
    assert commit_count(store) == before
    report = import_files(store, files_dir, skip_bad=True)
    assert report.ok
    assert report.written == {"files": 2}
    assert len(report.skipped) == 3
    assert any("already in the repo store with other content" in s for s in report.skipped)
    assert store.read(USERS).body == "already here"


def test_files_round_trip_byte_for_byte(tmp_path: Path, clock: FixedClock, files_dir: Path) -> None:
    first = gitmem.init(tmp_path / "one", clock=clock)
    import_files(first, files_dir)
    Graph(first).create_entities([{"name": "Ada", "entityType": "person", "observations": ["x"]}])
    first.create("a layered doc\n", id="projects/acme/known_issues")
    report = export_files(first, tmp_path / "out")
    assert report.ok and report.written == {"files": 5}
    ada = Graph(first).entity_id("Ada")
    assert ada is not None and (tmp_path / "out" / "repo" / f"{ada}.md").is_file()
    assert (tmp_path / "out" / "repo" / f"{NEW}.md").is_file()
    second = gitmem.init(tmp_path / "two", clock=clock)
    assert import_files(second, tmp_path / "out").ok
    for memory in first.list(include_superseded=True):
        assert memory.path is not None
        assert (second.path / memory.path).read_bytes() == (first.path / memory.path).read_bytes()
    assert entity(Graph(second), "Ada") is not None
    with pytest.raises(InvalidInputError, match="not an empty directory"):
        export_files(first, tmp_path / "out")


# -- the command line ----------------------------------------------------------------------------


def test_import_and_export_commands(store: Store, jsonl: Path, tmp_path: Path) -> None:
    gm = Gitmem(store.path, make_runner())
    out = gm("import", "mcp-jsonl", str(jsonl)).stdout
    assert "read:      3 entities, 3 relations" in out and "every entry matches" in out
    again = gm.json("import", "mcp-jsonl", str(jsonl))
    assert again["ok"] and again["written"]["entities"] == 0
    text = gm("export", "mcp-jsonl", "-").stdout
    assert sorted(text.rstrip("\n").split("\n")) == sorted(jsonl.read_text().split("\n"))
    report = gm.json("export", "mcp-jsonl", str(tmp_path / "x.jsonl"))
    assert report["ok"] and report["written"] == {"entities": 3, "relations": 3}
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{nope}\n")
    assert "line 1: not JSON" in gm.fails(4, "import", "mcp-jsonl", str(bad))
    assert gm.json("import", "mcp-jsonl", str(bad), "--skip-bad")["skipped"][0].startswith("line 1")
    gm("export", "files", str(tmp_path / "files"))
    assert gm.json("import", "files", str(tmp_path / "files"))["unchanged"] == {"files": 4}
    assert "No such file" in gm.fails(4, "import", "mcp-jsonl", str(tmp_path / "missing.jsonl"))


# -- forge -----------------------------------------------------------------------------------------

FORGE = {
    "projects/acme/project_profile.md": (
        "<!-- Last Updated: 2025-10-01 -->\n# Acme\n\nFastAPI with PostgreSQL.\n"
    ),
    "projects/index.md": "<!-- Last Updated: 2025-09-01 -->\n# Projects\n",
    "skills/py-review/acme/review_history.md": (
        "<!-- Last Updated: 2025-11-20 -->\n\n## 2025-11-20\n- fixtures everywhere\n"
    ),
    "commands/acme/known_issues.md": "<!-- Last Updated: 2024-02-29 -->\n### Slow search",
    "agents/reviewer/notes.md": "<!-- Last Updated: 2025-01-05 -->\n",
}


@pytest.fixture
def forge_dir(tmp_path: Path) -> Path:
    """A Forge plugin memory folder, written as the plugin writes it."""
    root = tmp_path / "memory"
    for relative, text in FORGE.items():
        (root / relative).parent.mkdir(parents=True, exist_ok=True)
        (root / relative).write_text(text, encoding="utf-8")
    (root / "README.md").write_text("about this folder\n")
    return root


def test_import_forge_keeps_bodies_and_dates(store: Store, forge_dir: Path) -> None:
    from gitmem.features.layered import LayeredStore
    from gitmem.features.transfer import import_forge

    before = commit_count(store)
    report = import_forge(store, forge_dir)
    assert report.ok, report.mismatches
    assert commit_count(store) == before + 5  # one commit per date, authored on that date
    assert report.read == {"files": 5} and report.written == {"files": 5}
    assert report.skipped == ["README.md: not under projects, skills, commands, agents"]
    profile = store.read("projects/acme/project_profile")
    assert profile.body == "# Acme\n\nFastAPI with PostgreSQL.\n"
    assert profile.title == "Acme"
    assert profile.updated_at.isoformat() == "2025-10-01T00:00:00+00:00"
    assert profile.extra["layer"] == "shared-project" and profile.extra["project"] == "acme"
    review = LayeredStore(store).get("skills/py-review/acme/review_history")
    assert review is not None
    assert review.layer == "skill-specific" and review.skill == "py-review"
    assert review.content.startswith("\n## 2025-11-20")
    assert store.read("commands/acme/known_issues").body == "### Slow search"
    assert store.read("projects/index").updated_at.date().isoformat() == "2025-09-01"


def test_forge_round_trip_is_byte_for_byte(store: Store, forge_dir: Path, tmp_path: Path) -> None:
    from gitmem.features.transfer import export_forge, import_forge

    import_forge(store, forge_dir)
    report = export_forge(store, tmp_path / "out")
    assert report.ok and report.written == {"files": 5}
    for relative, text in FORGE.items():
        assert (tmp_path / "out" / relative).read_text(encoding="utf-8") == text


def test_forge_files_without_a_date_or_with_bad_names(store: Store, tmp_path: Path) -> None:
    from gitmem.features.transfer import import_forge

    root = tmp_path / "memory"
    (root / "projects" / "acme").mkdir(parents=True)
    (root / "projects" / "acme" / "undated.md").write_text("# No date\n")
    (root / "projects" / "my project").mkdir()
    (root / "projects" / "my project" / "x.md").write_text("<!-- Last Updated: 2025-01-01 -->\n")
    with pytest.raises(InvalidInputError, match=r"my project/x\.md"):
        import_forge(store, root)
    report = import_forge(store, root, skip_bad=True)
    assert report.ok and report.written == {"files": 1}
    assert report.notes == [
        "projects/acme/undated.md: no <!-- Last Updated --> line, so it is dated now"
    ]
    assert store.read("projects/acme/undated").updated_at == store.clock.now()


def test_forge_commands(store: Store, forge_dir: Path, tmp_path: Path) -> None:
    gm = Gitmem(store.path, make_runner())
    assert gm.json("import", "forge", str(forge_dir))["written"] == {"files": 5}
    assert "every entry matches" in gm("export", "forge", str(tmp_path / "out")).stdout
    assert (tmp_path / "out" / "agents" / "reviewer" / "notes.md").read_text() == (
        "<!-- Last Updated: 2025-01-05 -->\n"
    )


# -- links and special files: nothing is read outside the folder given (issue 11, #6) ----------

INSIDE_ID = "mem_1a000000-0000-4000-8000-0000000000a1"
OUTSIDE_ID = "mem_1b000000-0000-4000-8000-0000000000b2"


def _memory_file(memory_id: str, body: str) -> str:
    return (
        f"---\nid: {memory_id}\ntitle: {body}\ncreated_at: 2026-01-02T03:04:05Z\n"
        f"updated_at: 2026-01-02T03:04:05Z\nversion: 1\n---\n\n{body}\n"
    )


def _hostile_folder(tmp_path: Path, inner: str) -> tuple[Path, Path]:
    """A folder to import whose links point out of it (file and folder, absolute and
    relative), into it, and round in loops, plus a FIFO; and the outside it points at."""
    outside = tmp_path / "outside"
    (outside / "private").mkdir(parents=True)
    (outside / "secret.md").write_text(_memory_file(OUTSIDE_ID, "OUTSIDE"))
    (outside / "private" / "deep.md").write_text(_memory_file(OUTSIDE_ID, "OUTSIDE"))
    folder = tmp_path / "import-me"
    base = folder / inner
    base.mkdir(parents=True)
    (base / "real.md").write_text(_memory_file(INSIDE_ID, "inside"))
    (base / "abs-file.md").symlink_to(outside / "secret.md")
    (base / "rel-file.md").symlink_to(Path("../" * len(Path(inner).parts)) / ".." / "outside"
                                      / "secret.md")
    (base / "abs-dir").symlink_to(outside / "private", target_is_directory=True)
    (base / "rel-dir").symlink_to(Path("../" * len(Path(inner).parts)) / ".." / "outside"
                                  / "private", target_is_directory=True)
    (base / "alias.md").symlink_to("real.md")  # inside: imported at its own path already
    (base / "loop-a.md").symlink_to("loop-b.md")
    (base / "loop-b.md").symlink_to("loop-a.md")
    (base / "up").symlink_to("..", target_is_directory=True)  # a folder loop
    (base / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    os.mkfifo(base / "pipe.md")  # read_bytes would block forever
    return folder, outside


LINKS = ["abs-file.md", "rel-file.md", "abs-dir", "rel-dir", "alias.md", "loop-a.md",
         "loop-b.md", "up", "dangling.md"]


def test_import_files_never_follows_a_link(store: Store, tmp_path: Path) -> None:
    folder, _ = _hostile_folder(tmp_path, "repo")
    report = import_files(store, folder)
    assert [m.id for m in store.list()] == [INSIDE_ID]
    assert store.get(OUTSIDE_ID) is None
    skipped = "\n".join(report.skipped)
    for name in LINKS:
        assert f"repo/{name}: a symbolic link" in skipped, (name, skipped)
    assert "repo/abs-file.md: a symbolic link out of the folder" in skipped
    assert "repo/rel-dir: a symbolic link out of the folder" in skipped
    assert "its target is imported at its own path" in skipped
    assert "repo/pipe.md: not a regular file" in skipped
    assert "OUTSIDE" not in skipped


def test_import_forge_never_follows_a_link(store: Store, tmp_path: Path) -> None:
    folder, outside = _hostile_folder(tmp_path, "projects/acme")
    (outside / "known_issues.md").write_text("<!-- Last Updated: 2026-01-01 -->\nOUTSIDE\n")
    (folder / "projects" / "acme" / "known_issues.md").symlink_to(outside / "known_issues.md")
    (folder / "projects" / "linked").symlink_to(outside, target_is_directory=True)
    (folder / "skills").symlink_to(outside, target_is_directory=True)  # a whole layer root
    report = import_forge(store, folder, skip_bad=True)
    stored = store.list()
    assert all("OUTSIDE" not in m.body for m in stored)
    assert store.get("projects/acme/known_issues") is None
    skipped = "\n".join(report.skipped)
    for name in ("projects/acme/known_issues.md", "projects/linked", "skills",
                 "projects/acme/abs-dir", "projects/acme/loop-a.md"):
        assert f"{name}: a symbolic link" in skipped, (name, skipped)


def test_cli_import_files_reports_the_links_it_skipped(store: Store, tmp_path: Path) -> None:
    folder, _ = _hostile_folder(tmp_path, "repo")
    run = Gitmem(store.path, make_runner())
    result = run("import", "files", str(folder))
    assert "abs-file.md: a symbolic link out of the folder" in result.stdout + result.stderr
    assert store.get(OUTSIDE_ID) is None


# -- imports get exactly the store's checks (Store.check_file, gitmem.format.memfile) ---------


def _import_file(memory_id: str, body: str, extra: str = "") -> bytes:
    return (
        f"---\nid: {memory_id}\nscope: repo\ncreated_at: 2025-01-02T03:04:05Z\n"
        f"updated_at: 2025-01-02T03:04:05Z\nversion: 1\n{extra}---\n\n{body}"
    ).encode()


IMPORT_ID = "mem_0b9c2c1e-8a4b-4c1d-9e2f-0123456789ab"
FAKE_KEY = "AKIA" + "ABCDEFGHIJKLMNOP"  # an AWS access key id's shape


def test_an_import_inside_secrets_allowed_is_allowed(store: Store, tmp_path: Path) -> None:
    """The store's own allow (``secrets_allowed()``) covers imports as it covers writes; it
    used to be honoured only through the ``allow_secrets`` attribute."""
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.md").write_bytes(_import_file(IMPORT_ID, f"aws key {FAKE_KEY}\n"))
    with pytest.raises(InvalidInputError, match="aws-access-key-id"):
        import_files(store, folder)
    with store.secrets_allowed():
        report = import_files(store, folder)
    assert report.written == {"files": 1}
    assert FAKE_KEY in store.read(IMPORT_ID).body


def test_an_oversized_import_is_too_large_like_a_write(store: Store) -> None:
    limit = store.config().max_body_bytes
    with pytest.raises(gitmem.TooLargeError, match="over the store's limit"):
        store.check_file(_import_file(IMPORT_ID, "x" * (limit + 1)), what="big.md")
    with pytest.raises(gitmem.TooLargeError):
        store.create("x" * (limit + 1))


def test_an_import_with_front_matter_over_the_bound_is_refused(store: Store) -> None:
    """The reader refuses front-matter over its bound; an import must not store a file every
    later read would refuse (there was no bound on this path)."""
    from gitmem.format.yamlbounds import MAX_FRONT_MATTER_BYTES

    big = "notes: " + "y" * (MAX_FRONT_MATTER_BYTES + 10) + "\n"
    with pytest.raises(gitmem.GitmemError, match="front-matter"):
        store.check_file(_import_file(IMPORT_ID, "small body\n", big), what="wide.md")
    assert store.get(IMPORT_ID) is None
