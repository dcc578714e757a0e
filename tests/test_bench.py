"""The benchmark command works and its fixtures are faithful; no timing is asserted here."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pygit2
import pytest

import gitmem
from bench.fixtures import build_history, fields_for, memory_text, new_memory_id
from bench.harness import SCENARIOS, Row, fmt_value, percentile
from bench.writes import lost_writes, run_rounds
from gitmem.format.layout import memory_path

REPO = Path(__file__).resolve().parent.parent


def _blob(path: Path, memory_id: str) -> bytes:
    repo = pygit2.Repository(str(path))
    tree = repo.revparse_single("refs/heads/main").peel(pygit2.Tree)
    blob = repo[tree[memory_path(memory_id)].id]
    assert isinstance(blob, pygit2.Blob)
    return blob.data


def test_memory_text_is_what_gitmem_writes(tmp_path: Path) -> None:
    # Baselines and fast-imported histories use this template: it must be gitmem's format.
    when = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)
    store = gitmem.init(tmp_path / "s.git", bare=True, clock=gitmem.FixedClock(when))
    rng = random.Random(3)
    first, second = fields_for(1, rng), fields_for(2, rng)
    old = store.create(first.body, id=new_memory_id(rng), **first.create_kwargs())
    new = store.supersede(old.id, second.body, id=new_memory_id(rng), **second.create_kwargs())
    assert _blob(tmp_path / "s.git", old.id) == memory_text(old.id, first, created=when).encode()
    expected = memory_text(new.id, second, created=when, supersedes=old.id)
    assert _blob(tmp_path / "s.git", new.id) == expected.encode()


def test_fast_imported_history_reads_back(tmp_path: Path) -> None:
    hist = build_history(tmp_path / "h.git", 20, 3, random.Random(5))
    store = gitmem.open(hist.path)
    history = store.history(hist.tracked_id)
    assert len(history) == hist.versions == 4
    assert not history.warnings
    assert [v.version for v in history] == [1, 2, 3, 4]
    assert len(store.list()) == 20 - 3


def test_percentile_and_formatting() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([0.0, 10.0], 99) == pytest.approx(9.9)
    assert fmt_value(1234.4) == "1,234"
    assert fmt_value(0.01234) == "0.0123"
    faster = Row("s", "1k", "ms", 1.0, "b", 4.0, higher_is_better=False)
    assert faster.ratio() == 4.0 and "faster" in faster.ratio_text()
    slower = Row("s", "1k", "commits/s", 50.0, "b", 100.0)
    assert slower.ratio() == 0.5 and "slower" in slower.ratio_text()


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bench", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


@pytest.mark.slow
def test_list_names_every_scenario(tmp_path: Path) -> None:
    result = _bench("--list", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    for name in SCENARIOS:
        assert name in result.stdout


@pytest.mark.slow
def test_tiny_benchmark_writes_the_table(tmp_path: Path) -> None:
    out, rows_json = tmp_path / "bench.md", tmp_path / "bench.json"
    result = _bench(
        "--tiny", "--out", str(out), "--json", str(rows_json), "--workdir", str(tmp_path / "w"),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    table = out.read_text()
    assert table in result.stdout
    assert "| scenario | size | metric | gitmem |" in table
    assert "- scratch stores on: " in table
    assert "FAILED" not in table
    rows = json.loads(rows_json.read_text())
    measured = [r for r in rows if r["value"] is not None]
    for scenario in ("single create", "history of one memory", "recall (hybrid", "recall quality"):
        assert any(r["scenario"].startswith(scenario) for r in measured), scenario
    assert list((tmp_path / "w").iterdir()) == []  # scratch stores were removed


def test_writer_rounds_count_every_create(tmp_path: Path) -> None:
    store = gitmem.init(tmp_path / "w.git", bare=True)
    rounds = run_rounds(store.path, writers=2, ops=3, rounds=2, seed=1)
    assert [r.timed for r in rounds] == [6, 6]
    assert [len(r.acknowledged) for r in rounds] == [8, 6]  # round 0 adds the warm-ups
    assert all(not r.errors for r in rounds)
    acknowledged = [mid for r in rounds for mid in r.acknowledged]
    assert len(set(acknowledged)) == 14
    assert lost_writes(store.path, acknowledged) == []


@pytest.mark.skipif(
    not Path("/proc/self/mountinfo").exists() or shutil.which("df") is None,
    reason="reads Linux's mount table; df names the same mount",
)
def test_the_report_names_the_file_system_of_its_scratch_stores(tmp_path: Path) -> None:
    """Write timings on ext4 without a journal depend on what was deleted in the last
    minutes, so the report says where its stores were made; the mount is the one df names."""
    from bench.report import store_filesystem

    out = subprocess.run(
        ["df", "--output=fstype,source,target", str(tmp_path)],
        capture_output=True, text=True, check=True,
    ).stdout.splitlines()[1].split()
    named = store_filesystem(tmp_path)
    assert named.startswith(f"{out[0]} ({out[1]} on {out[2]})"), (named, out)
    assert ("journal" in named) == (out[0] == "ext4")
    assert store_filesystem(tmp_path / "not" / "made" / "yet").startswith(out[0])


@pytest.mark.slow
def test_the_write_floors_bench_runs(capsys: pytest.CaptureFixture[str]) -> None:
    from bench import writes

    writes.main(["--size", "50", "--creates", "60", "--ops", "3", "--writer-ops", "2",
                 "--repeat", "1"])
    table = capsys.readouterr().out.split("| figure |", 1)[1]
    figures = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(figures) == 4, figures  # create rate, size on disk, loose objects, 8 writers
    assert "| 8 writer processes |" in table and "0 lost of" in table
