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

from storetools import TABLE_HASHES

from gitmem.store.core import Store

_SCRIPT = TABLE_HASHES + r"""
import json, sys
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
    return table_hashes(index.connect(), rowids=False)
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


_BOUNDED = TABLE_HASHES + r"""
import json, pathlib, subprocess, sys
import pygit2
import gitmem
from gitmem.store import decodepool, index as ix

events = []
original_versions = ix.Index._apply_versions
def versions(self, *args, **kwargs):
    events.append(("versions", pygit2.settings.cached_memory[1]))
    return original_versions(self, *args, **kwargs)
ix.Index._apply_versions = versions
original_init = decodepool.DecodePool.__init__
def init(self, *args, **kwargs):
    original_init(self, *args, **kwargs)
    # forked by now, not at the first batch
    events.append(("forked", len(self._executor._processes), pygit2.settings.cached_memory[1]))
decodepool.DecodePool.__init__ = init
original_fill = ix.Index._fill_empty
def fill(self, *args, **kwargs):
    events.append(("fill",))
    return original_fill(self, *args, **kwargs)
ix.Index._fill_empty = fill

decodepool.BATCH = 7
index = gitmem.open(sys.argv[1]).index()
def tables():
    return table_hashes(index.connect(), also=("commits",), fts="deploys")
cache_before = pygit2.settings.cached_memory[1]
decodepool.PARALLEL_FROM = 10**12
index.rebuild()
alone = tables()
alone_events = list(events)
events.clear()
# Caches and pack windows far smaller than what the build reads (the pack is larger than
# the windows' limit), and a worker from the tenth file on.
subprocess.run(["git", "-C", sys.argv[1], "repack", "-a", "-d", "-q"], check=True)
ix.BUILD_GIT_CACHE = 1
ix.FILL_GIT_CACHE = 1
pygit2.settings.mwindow_size = 8192
pygit2.settings.mwindow_mapped_limit = 16384
decodepool.PARALLEL_FROM = 10
index.rebuild()
packs = pathlib.Path(sys.argv[1], ".git", "objects", "pack")
print(json.dumps({"alone": alone, "bounded": tables(), "usable": decodepool.usable(),
                  "events": events, "alone_events": alone_events,
                  "cache_before": cache_before, "cache_after": pygit2.settings.cached_memory[1],
                  "pack": max(p.stat().st_size for p in packs.glob("*.pack"))}))
"""


def test_a_first_build_forks_its_worker_after_the_version_rows_with_bounded_caches(
    store: Store, tmp_path: Path
) -> None:
    for n in range(60):
        store.create(f"memory {n} about deploys " + "words " * 40, tags=["ci"] if n % 2 else [])
    first = store.create("the first version")
    store.supersede(first.id, "its successor")
    result = build_with_a_broken_file(store, tmp_path, _BOUNDED)
    assert result["bounded"] == result["alone"]
    assert result["alone"]["memories"].endswith(" 62")
    assert result["pack"] > 16384  # more than the windows may map at once
    # libgit2's cache bounded while the version rows are written, as it was afterwards
    assert result["alone_events"] == [["versions", 64 << 20], ["fill"]]
    assert result["cache_after"] == result["cache_before"]
    if result["usable"]:
        # the worker forked once, after the version rows, before the fill, with its cache bound
        assert result["events"] == [["versions", 1], ["forked", 1, 1], ["fill"]]
    else:
        assert result["events"] == [["versions", 1], ["fill"]]


def test_loading_the_index_starts_no_process() -> None:
    """The C heap's ``malloc_trim`` is looked up when a first build needs it, among the
    symbols already loaded: ``ctypes.util.find_library`` runs ``ldconfig -p``, and at
    import time it did so for every command that loads the index."""
    import platform

    script = (
        "import subprocess\n"
        "def refuse(*args, **kwargs):\n"
        "    raise AssertionError(f'a process started: {args[1:2]}')\n"
        "subprocess.Popen.__init__ = refuse\n"
        "import gitmem.store.index as index\n"
        "trim = index._libc_malloc_trim()\n"
        "print('ok', trim is not None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-P", "-c", script], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("ok")
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":
        assert done.stdout.strip() == "ok True"  # found on glibc, without a process
