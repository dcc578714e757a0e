"""What a deleted file costs the next one made: ext4 without a journal, and packing.

Without a journal, ext4 will not reuse an inode freed in the last minutes: every new file
scans past each such free inode of its block group (``find_inode_bit`` ->
``recently_deleted``). Two measurements of what that does to gitmem's writes, on the file
system of ``--dir`` (default: the temporary folder; the report names it):

- ``files``: 1,000 files of 300 bytes made one by one (CPU a file), then 20,000 more made
  and deleted beside them, then 1,000 again, and again after that;
- ``packing``: ``--creates`` single creates into a populated bare store by one process,
  with automatic packing on and off (``gc.auto=0``), alternated: the writer's user and
  system CPU a create, and the packing helpers' (their git's included: the writer reaps its
  last helper, then reads ``RUSAGE_CHILDREN``)::

    python -m bench.inodes
    TMPDIR=/dev/shm python -m bench.inodes --only packing
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path


def _cpu() -> tuple[float, float]:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime, usage.ru_stime


def _make(folder: Path, count: int, tag: str) -> float:
    """Make ``count`` files in ``folder``: µs of CPU a file."""
    folder.mkdir(parents=True, exist_ok=True)
    user, system = _cpu()
    for i in range(count):
        fd = os.open(folder / f"{tag}{i}", os.O_CREAT | os.O_WRONLY | os.O_EXCL, 0o444)
        os.write(fd, b"x" * 300)
        os.close(fd)
    end_user, end_system = _cpu()
    return (end_user - user + end_system - system) / count * 1e6


def files(root: Path, deleted: int) -> None:
    base = Path(tempfile.mkdtemp(prefix="gitmem-inodes-", dir=root))
    try:
        print(f"files of 300 bytes made one by one in {base.parent} (load "
              f"{os.getloadavg()[0]:.2f}), µs of CPU a file:")
        print(f"  1,000 made: {_make(base / 'a', 1000, 'x'):.1f}")
        _make(base / "b", deleted, "y")
        for i in range(deleted):
            (base / "b" / f"y{i}").unlink()
        print(f"  1,000 more, after {deleted:,} others were made and deleted: "
              f"{_make(base / 'a', 1000, 'z'):.1f}")
        print(f"  1,000 more: {_make(base / 'a', 1000, 'w'):.1f}")
    finally:
        shutil.rmtree(base)


def _creates(root: Path, packing: bool, size: int, creates: int, made: list[Path]) -> str:
    import pygit2

    import gitmem
    from bench.fixtures import fields_for, populate
    from gitmem.git import autopack

    base = Path(tempfile.mkdtemp(prefix="gitmem-inodes-", dir=root))
    made.append(base)  # removed at the end: deleting a store here would tax the next run
    path = base / "store.git"
    populate(path, size, bare=True, rng=random.Random(1), format=4)
    deadline = time.monotonic() + 120
    while autopack._busy(path) and time.monotonic() < deadline:
        time.sleep(0.1)  # the import's own packing is not this run's
    if not packing:
        pygit2.Repository(str(path)).config["gc.auto"] = "0"
    store = gitmem.open(str(path))
    rng = random.Random(2)
    batch = [fields_for(size + i, rng) for i in range(creates)]
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = _cpu()
    started = time.perf_counter()
    for item in batch:
        store.create(item.body, **item.create_kwargs())
    wall = time.perf_counter() - started
    end_user, end_system = _cpu()
    helper = store.db().autopack._helper
    if helper is not None:
        helper.wait()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    helpers = after.ru_utime + after.ru_stime - children.ru_utime - children.ru_stime
    return (
        f"packing {'on ' if packing else 'off'}: {creates / wall:5.0f} creates/s; writer "
        f"{(end_user - user) / creates * 1e3:.2f} user + "
        f"{(end_system - system) / creates * 1e3:.2f} system ms a create; helpers "
        f"{helpers / creates * 1e3:.2f} ms a create"
    )


def packing(root: Path, size: int, creates: int, rounds: int) -> None:
    print(f"{creates:,} single creates into {size:,} memories, one process, in {root} "
          f"(load {os.getloadavg()[0]:.2f}):")
    made: list[Path] = []
    try:
        for number in range(rounds):
            for on in (True, False) if number % 2 == 0 else (False, True):
                print("  " + _creates(root, on, size, creates, made), flush=True)
    finally:
        for base in made:
            shutil.rmtree(base, ignore_errors=True)
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


def main(argv: list[str] | None = None) -> int:
    from bench.report import store_filesystem

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["files", "packing"])
    parser.add_argument("--dir", type=Path, default=Path(tempfile.gettempdir()))
    parser.add_argument("--deleted", type=int, default=20_000)
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--creates", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args(argv)
    if not sys.platform.startswith("linux"):
        print("bench.inodes: Linux only")
        return 0
    print(f"file system: {store_filesystem(args.dir)}")
    if args.only in (None, "files"):
        files(args.dir, args.deleted)
    if args.only in (None, "packing"):
        packing(args.dir, args.size, args.creates, args.rounds)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
