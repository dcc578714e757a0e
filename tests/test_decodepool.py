"""A first index build decodes on a second processor too (gitmem.store.decodepool).

The build runs in a subprocess: the pool is only used in a process with no other thread,
and pytest's workers have some. The subprocess builds the index of the same store one
file at a time and with a worker, and the tables must come out the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from gitmem.store.core import Store

_SCRIPT = r"""
import hashlib, json, sys
import gitmem
from gitmem.store import decodepool

submitted = []
original = decodepool.DecodePool.submit
def counting(self, items):
    submitted.append(len(items))
    return original(self, items)
decodepool.DecodePool.submit = counting
decodepool.BATCH = 7

index = gitmem.open(sys.argv[1]).index()
def tables():
    conn = index.connect()
    out = {}
    for table in ("memories", "tags", "edges", "problems", "versions"):
        rows = sorted(repr(r) for r in conn.execute(f"SELECT * FROM {table}"))
        out[table] = hashlib.sha256("\n".join(rows).encode()).hexdigest() + f" {len(rows)}"
    return out
decodepool.PARALLEL_FROM = 10**12
index.rebuild()
alone = tables()
decodepool.PARALLEL_FROM = 10
index.rebuild()
print(json.dumps({"alone": alone, "pooled": tables(), "usable": decodepool.usable(),
                  "submitted": sum(submitted)}))
"""


def build_with_a_broken_file(store: Store, tmp_path: Path, script: str) -> dict[str, Any]:
    """Commit a file the index cannot read (a problem row, whoever decodes it) with what
    else the work tree holds, then run ``script`` on the store; what it printed, as JSON."""
    broken = store.path / "memories" / "0" / "0" / "0" / "0" / "mem_0000-broken.md"
    broken.parent.mkdir(parents=True, exist_ok=True)
    broken.write_text("no front-matter\n")
    subprocess.run(["git", "-C", str(store.path), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(store.path), "-c", "user.name=t", "-c", "user.email=t@t",
         "commit", "-q", "--no-verify", "-m", "a broken file"],
        check=True,
    )
    path = tmp_path / "build.py"
    path.write_text(script)
    done = subprocess.run(
        [sys.executable, str(path), str(store.path)], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def test_a_build_with_a_worker_makes_the_same_tables(store: Store, tmp_path: Path) -> None:
    for n in range(60):
        store.create(f"memory {n} about deploys", tags=["ci"] if n % 2 else [])
    first = store.create("the first version")
    store.supersede(first.id, "its successor")
    result = build_with_a_broken_file(store, tmp_path, _SCRIPT)
    assert result["pooled"] == result["alone"]
    assert result["alone"]["memories"].endswith(" 62")
    assert not result["alone"]["problems"].endswith(" 0")
    if result["usable"]:
        assert result["submitted"] > 0  # the worker decoded some of it
