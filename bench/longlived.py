"""A long-lived process and the packs a repack deletes under it.

libgit2 adds every pack it finds to a repository handle's list and never drops one. A
process that keeps its store open (the MCP server, an agent's writer) while the automatic
packer rolls packs up (``git repack -a -d -l -k``) or a user runs ``git gc`` keeps the
deleted packs open, so their disk space is not given back, and every object it writes or
misses looks through their indexes again. This measures both:

- ``mechanism``: one pygit2 handle that has read from N packs, which are then deleted (or
  kept), writing loose objects: CPU an object write against N;
- ``store``: one process creating ``--creates`` memories into a populated bare store with
  automatic packing on (``gc.autoPackLimit`` lowered to ``--pack-limit`` so that roll-ups
  happen within the run), reporting after each block the deleted pack files it still holds
  (open or mapped, from Linux's ``/proc``) and their bytes, and its CPU a create::

    python -m bench.longlived
    GITMEM_BENCH_ROOT=/path/to/another/checkout python -m bench.longlived --only store

The root is put first on ``sys.path``, so its ``gitmem`` is the one measured (its ``bench``
must hold this file too: copy it into an older checkout). Linux only.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

_ROOT = os.environ.get("GITMEM_BENCH_ROOT")
if _ROOT:
    sys.path.insert(0, _ROOT)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def held_deleted_packs() -> tuple[int, int]:
    """Deleted files of an ``objects/pack`` this process holds open or mapped: how many,
    and their bytes (an open file's size; a mapped-only file's mapped range)."""
    sizes: dict[str, int] = {}
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = str(fd.readlink())
            if "/objects/pack/" in target and target.endswith("(deleted)"):
                sizes[target] = fd.stat().st_size
        except OSError:
            continue
    with Path("/proc/self/maps").open() as maps:
        for line in maps:
            parts = line.split(None, 5)
            if len(parts) < 6 or "/objects/pack/" not in parts[5]:
                continue
            path = parts[5].strip()
            if path.endswith("(deleted)") and path not in sizes:
                start, end = (int(x, 16) for x in parts[0].split("-"))
                sizes[path] = end - start
    return len(sizes), sum(sizes.values())


def mechanism(counts: list[int], ops: int) -> None:
    import pygit2

    from bench.packwrite import _records, _write_pack

    print(f"one handle, {ops} loose blob writes after reading from N packs (load "
          f"{os.getloadavg()[0]:.2f})")
    for count in counts:
        for deleted in (False, True):
            if count == 0 and deleted:
                continue
            tmp = Path(tempfile.mkdtemp(prefix="gitmem-longlived-"))
            try:
                pygit2.init_repository(str(tmp), bare=True)
                folder = tmp / "objects" / "pack"
                bodies = [f"pack {i}\n".encode() for i in range(count)]
                names = [_write_pack(folder, _records([(3, body)])) for body in bodies]
                repo = pygit2.Repository(str(tmp))
                for body in bodies:  # each read opens its pack, as reads over time would
                    repo.odb.read(pygit2.hash(body))
                if deleted:
                    for base in names:
                        for suffix in (".idx", ".pack"):
                            Path(f"{base}{suffix}").unlink()
                started = _cpu()
                for i in range(ops):
                    repo.create_blob(f"object {count} {i}\n".encode())
                took = (_cpu() - started) / ops * 1e6
            finally:
                shutil.rmtree(tmp)
            state = "deleted" if deleted else "on disk"
            print(f"  {count:5d} packs {state}: {took:7.1f} µs CPU a loose object write")


def store(size: int, creates: int, block: int, pack_limit: int) -> None:
    import pygit2

    import gitmem
    from bench.fixtures import fields_for, populate

    root = _ROOT or str(Path(gitmem.__file__).parent.parent)
    tmp = Path(tempfile.mkdtemp(prefix="gitmem-longlived-"))
    try:
        path = tmp / "store.git"
        populate(path, size, bare=True, rng=random.Random(1), format=4)
        pygit2.Repository(str(path)).config["gc.autoPackLimit"] = str(pack_limit)
        subprocess.run(["git", "-C", str(path), "repack", "-a", "-d", "-q"], check=True)
        print(f"{root}: one process, {creates:,} creates into {size:,} memories, packing on, "
              f"gc.autoPackLimit {pack_limit} (load {os.getloadavg()[0]:.2f})")
        opened = gitmem.open(str(path))
        rng = random.Random(2)
        done = 0
        total = 0.0
        while done < creates:
            fields = [fields_for(size + done + i, rng) for i in range(block)]
            started = _cpu()
            for item in fields:
                opened.create(item.body, **item.create_kwargs())
            spent = _cpu() - started
            total += spent
            took = spent / block * 1e3
            done += block
            helper = opened.db().autopack._helper
            if helper is not None:
                helper.wait()  # the block's last repack is done: count what it deleted
            packs = len(list((path / "objects" / "pack").glob("*.pack")))
            files, held = held_deleted_packs()
            print(f"  after {done:6,} creates: {took:5.2f} ms CPU a create; {packs:2d} packs; "
                  f"deleted pack files held {files:3d}, {held / 2**20:6.1f} MiB", flush=True)
        print(f"  all {done:,} creates: {total / done * 1e3:.2f} ms CPU a create")
    finally:
        shutil.rmtree(tmp)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", choices=["mechanism", "store"])
    parser.add_argument("--packs", default="0,50,200,800", help="mechanism: pack counts")
    parser.add_argument("--ops", type=int, default=2000, help="mechanism: writes a count")
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--creates", type=int, default=6_000)
    parser.add_argument("--block", type=int, default=1_000)
    parser.add_argument("--pack-limit", type=int, default=4)
    args = parser.parse_args(argv)
    if args.only in (None, "mechanism"):
        mechanism([int(x) for x in args.packs.split(",")], args.ops)
    if args.only in (None, "store"):
        store(args.size, args.creates, args.block, args.pack_limit)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
