"""gitmem review on a crafted range: golden files for markdown, text and JSON, and --strict.

Every commit of the crafted store is deterministic (fixed clock, explicit ids, fixed
dates for the hand commits), so the goldens hold real commit ids. Regenerate them
after an intended change with ``GITMEM_UPDATE_GOLDENS=1 pytest tests/test_review.py``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from clitools import Gitmem, make_runner
from conftest import run_git
from storetools import memory_text, plant

import gitmem
from gitmem import FixedClock, Store
from gitmem.features import review as R
from gitmem.format.layout import memory_path

GOLDEN = Path(__file__).parent / "golden"

# Built at run time so no scanner (gitmem secrets included) flags this file.
FAKE_KEY = "AKIA" + "QWERTYUIOPASDFGH"


def mid(n: int) -> str:
    return f"mem_{n:02d}000000-0000-4000-8000-0000000000{n:02d}"


def hand(store: Store, path: str, text: str, message: str) -> None:
    plant(store, path, text, message)


@pytest.fixture
def crafted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Store:
    monkeypatch.setenv("GIT_AUTHOR_DATE", "2026-11-22T12:00:00Z")
    monkeypatch.setenv("GIT_COMMITTER_DATE", "2026-11-22T12:00:00Z")
    clock = FixedClock("2026-11-22T10:00:00Z")
    store = gitmem.init(tmp_path / "store", clock=clock)
    store.create(
        "Use fixtures.\nKeep them small.\n",
        id=mid(1),
        title="Prefer pytest fixtures",
        category="coding-preferences",
        tags=["testing"],
        agent="hephaestus",
    )
    store.create("We use SQLite.\n", id=mid(2), title="Storage decision", agent="athena")
    store.create("Obsolete.\n", id=mid(3), title="To delete")
    store.create("Old news.\n", id=mid(4), title="To archive")
    store.create("Moving body.\n", id=mid(5), title="To move")
    store.create(
        "# Reviews\n\n## 2026-11-01 one\nok\n## 2026-11-02 two\nok\n",
        id="projects/demo/review_history",
        title="Review history",
    )
    run_git(store.path, "tag", "base")
    clock.advance(hours=1)
    store.update(
        mid(1),
        "Use fixtures.\nKeep them small and local.\n",
        tags=["testing", "pytest"],
        agent="hephaestus",
    )
    store.supersede(mid(2), "We use SQLite with WAL.\n", id=mid(6), agent="athena")
    store.supersede(mid(2), "We use Postgres.\n", id=mid(7), agent="hermes")
    store.delete(mid(3), agent="hermes")
    store.update(mid(4), status="archived")
    with store.transaction("move the memory"):
        store.delete(mid(5))
        store.create("Moving body.\n", id=mid(8), title="Moved")
    notes = store.create(
        "Deploy with the key (see the vault).\n",
        id=mid(9),
        title="Deploy notes",
        related=[(mid(99), "refines")],
        extra={"anchors": ["src/app.py", "gone.py"]},
    )
    # A hand edit puts a credential in (the store itself refuses to write one).
    text = (store.path / notes.path).read_text()  # type: ignore[operator]
    hand(
        store,
        memory_path(mid(9)),
        text.replace("(see the vault)", FAKE_KEY),
        "hand edit: the key",
    )
    store.create(
        "The other side's version.\n", id=mid(1) + ".fork-0123456789", extra={"merge_fork": mid(1)}
    )
    hand(store, memory_path(mid(10)), memory_text(mid(10), supersedes=mid(98)), "dangling")
    hand(store, memory_path(mid(11)), memory_text(mid(11), supersedes=mid(12)), "cycle 1")
    hand(store, memory_path(mid(12)), memory_text(mid(12), supersedes=mid(11)), "cycle 2")
    hand(store, memory_path(mid(13)), "---\nid: [broken\n---\nbody\n", "broken file")
    hand(
        store,
        "projects/demo/review_history.md",
        "---\nid: projects/demo/review_history\ntitle: Review history\n"
        "created_at: 2026-11-22T10:00:00Z\nupdated_at: 2026-11-22T12:00:00Z\nversion: 2\n---\n\n"
        "# Reviews\n\n## 2026-11-02 two\nok\n",
        "prune: review history\n\nGitmem-Op: prune\nGitmem-Id: projects/demo/review_history",
    )
    return store


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    run_git(tmp_path, "init", "-q", "-b", "main", "project")
    (root / "src").mkdir()
    (root / "src" / "app.py").write_text("print('hi')\n")
    run_git(root, "add", ".")
    run_git(root, "commit", "-qm", "app")
    return root


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("GITMEM_UPDATE_GOLDENS"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"no golden {path}; run with GITMEM_UPDATE_GOLDENS=1"
    assert text == path.read_text()


def test_kinds_and_problems(crafted: Store, project: Path) -> None:
    result = R.review(crafted, "base..HEAD", project=project)
    kinds = {c.id: c.kind for c in result.changes}
    assert kinds[mid(1)] == "updated"
    assert kinds[mid(6)] == kinds[mid(7)] == "superseded"
    assert kinds[mid(3)] == "deleted"
    assert kinds[mid(4)] == "archived"
    assert kinds[mid(8)] == "moved" and mid(5) not in kinds
    assert kinds["projects/demo/review_history"] == "pruned"
    assert kinds[mid(9)] == "added"
    problems = {(p.kind, p.memory_id) for p in result.problems}
    assert ("fork", mid(2)) in problems  # two successors
    assert ("fork", mid(1) + ".fork-0123456789") in problems
    assert ("dangling-supersedes", mid(10)) in problems
    assert ("dangling-related", mid(9)) in problems
    assert ("cycle", mid(11)) in problems and ("cycle", mid(12)) in problems
    assert ("secret", mid(9)) in problems
    assert ("missing-anchor", mid(9)) in problems
    assert any(kind == "invalid" for kind, _ in problems)
    [updated] = [c for c in result.changes if c.id == mid(1)]
    assert [f.name for f in updated.fields] == ["tags", "updated_at", "version"]
    assert updated.agents == ["hephaestus"] and len(updated.commits) == 1
    for fmt in R.FORMATS:
        assert FAKE_KEY not in R.render(result, fmt)


@pytest.mark.parametrize(
    ("fmt", "name"), [("markdown", "review.md"), ("text", "review.txt"), ("json", "review.json")]
)
@pytest.mark.slow
def test_golden_output(crafted: Store, project: Path, fmt: str, name: str) -> None:
    result = R.review(crafted, "base..HEAD", project=project)
    check_golden(name, R.render(result, fmt))


def test_truncated_and_full_diffs(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "s", clock=FixedClock("2026-11-22T10:00:00Z"))
    memory = store.create("".join(f"line {i}\n" for i in range(200)))
    store.update(memory.id, "".join(f"line {i} changed\n" for i in range(200)))
    short = R.review(store, "HEAD~1..HEAD").changes[0]
    assert len(short.diff) == R.DIFF_LIMIT and short.diff_truncated > 0
    assert "more line(s)" in R.render(R.review(store, "HEAD~1..HEAD"))
    full = R.review(store, "HEAD~1..HEAD", full=True).changes[0]
    assert full.diff_truncated == 0 and len(full.diff) > R.DIFF_LIMIT


def test_ranges(crafted: Store) -> None:
    tip = str(crafted.db().tip().id)  # type: ignore[union-attr]
    assert R.parse_range(crafted.db(), "base")[1] == tip
    assert R.parse_range(crafted.db(), "base...HEAD") == R.parse_range(crafted.db(), "base..HEAD")
    with pytest.raises(gitmem.NotFoundError):
        R.review(crafted, "nope..HEAD")
    with pytest.raises(gitmem.InvalidInputError):
        R.review(crafted, " ")


def test_cli_strict_exit_codes(crafted: Store, project: Path) -> None:
    cli = Gitmem(crafted.path, make_runner())
    out = cli("review", "base..HEAD", "--project", str(project)).stdout
    assert out.startswith("## gitmem review")
    result = cli("review", "base..HEAD", "--strict", code=8)
    assert "problem(s)" in result.stderr
    data = json.loads(cli("review", "base..HEAD", "--json").stdout)
    assert data["counts"]["moved"] == 1
    clean = crafted.create("fine", id=mid(20))
    assert clean
    text = cli("review", "HEAD~1..HEAD", "--strict", "--format", "text").stdout
    assert "1 added" in text


def test_forks_found_without_the_index_too(crafted: Store) -> None:
    """Up to the tip the index answers successors; an older HEAD is scanned: same problems."""
    at_tip = R.review(crafted, "base..HEAD").problems
    crafted.create("one more", id=mid(30))
    older = R.review(crafted, "base..HEAD~1").problems
    assert at_tip == older


def test_a_project_store_checks_its_own_project(project: Path) -> None:
    store = gitmem.init_project(project, clock=FixedClock("2026-11-22T10:00:00Z"))
    store.create("x", id=mid(40), extra={"anchors": ["src/app.py", "src/gone.py"]})
    problems = R.review(store, "HEAD~1..HEAD").problems
    assert [(p.kind, p.message) for p in problems] == [
        ("missing-anchor", "anchor src/gone.py does not exist at the project's HEAD")
    ]
