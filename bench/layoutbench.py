"""What the shard layout costs a single create, at 1k to 1M memories (issue 17).

Every create rewrites the trees on its file's path: the root, ``memories/`` and the shard
that holds the file. With today's layout (``memories/<xx>/<id>.md``, 256 shards) the
``memories/`` tree is 256 entries (~7 KB) from the first memory on, and at 1M each shard
holds ~3,900 entries (~285 KB): the bytes a create writes, and the time libgit2 takes to
write them, grow with the store. This builds stores of a given size in each candidate
layout with bare pygit2 (no gitmem code: the floor any gitmem on that layout pays), then
times creates into them and measures what each leaves on disk as loose objects::

    python -m bench.layoutbench --sizes 1000,100000,1000000 --creates 200

Layouts:

- ``256``: today's ``memories/ab/<id>.md``;
- ``256x2``: ``memories/ab/cd/<id>.md`` (65,536 leaf trees);
- ``16x4``: ``memories/a/b/c/d/<id>.md`` (16-entry trees at every level, 65,536 leaves).

Reported per size and layout: the median and p90 microseconds of CPU time (user and
system: the file writes are system time) of one create (a blob, the trees on its path, a
commit, the branch moved; CPU time because wall time on a shared 2-core machine moves 3x
between runs), the loose bytes it adds on disk (apparent
size of the new object files), and the ratio of those bytes to the memory file's own.
The stores are made with strict object creation off (their tree entries name blobs that
are never written, so 1M of them cost seconds, not a million files); the creates timed
write real blobs.

``--store`` times gitmem itself: a real bare store of each size in format 3 (the legacy
``256`` layout) and format 4 (``16x4``), filled by one bulk import, then ``--creates``
single ``Store.create`` calls, measured the same way (CPU time, loose bytes; automatic
packing off, ``gc.auto=0``, so nothing is packed away under the count), each beside the
bare-pygit2 floor of its layout at the same size in the same run::

    python -m bench.layoutbench --store --sizes 1000,100000 --creates 200

``--migrate N`` times ``gitmem migrate --to 4`` of a format 3 store of N memories (wall
time; its peak RSS is the process's, so run it alone under ``/usr/bin/time -v``).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
import uuid
from pathlib import Path

import pygit2
from pygit2.enums import FileMode, Option

LAYOUTS = ("256", "256x2", "16x4")
BODY = (
    "---\nid: {id}\ntitle: a memory of about the usual size\ncreated_at: 2026-11-26T09:00:00Z\n"
    "updated_at: 2026-11-26T09:00:00Z\nversion: 1\nagent: bench\ntags: [scale, layout]\n---\n"
    "The build cache is keyed on the lock file; a retry after a timeout reuses it. " * 4
)


def split(layout: str, memory_id: str) -> list[str]:
    """The directories under ``memories/`` that hold ``memory_id`` in ``layout``."""
    hexes = memory_id[len("mem_") :].replace("-", "")
    if layout == "256":
        return [hexes[:2]]
    if layout == "256x2":
        return [hexes[:2], hexes[2:4]]
    return [hexes[0], hexes[1], hexes[2], hexes[3]]


def _new_id(rng: random.Random) -> str:
    return f"mem_{uuid.UUID(int=rng.getrandbits(128), version=4)}"


def _fake_oid(rng: random.Random) -> pygit2.Oid:
    return pygit2.Oid(raw=rng.getrandbits(160).to_bytes(20, "big"))


def build(repo: pygit2.Repository, layout: str, size: int, rng: random.Random) -> pygit2.Oid:
    """A root tree holding ``size`` memory entries in ``layout``; its id."""
    nested: dict[str, object] = {}
    for _ in range(size):
        memory_id = _new_id(rng)
        node = nested
        for part in split(layout, memory_id):
            node = node.setdefault(part, {})  # type: ignore[assignment]
        node[f"{memory_id}.md"] = _fake_oid(rng)

    def write(node: dict[str, object]) -> pygit2.Oid:
        builder = repo.TreeBuilder()
        for name, child in node.items():
            if isinstance(child, dict):
                builder.insert(name, write(child), FileMode.TREE)
            else:
                assert isinstance(child, pygit2.Oid)
                builder.insert(name, child, FileMode.BLOB)
        return builder.write()

    memories = write(nested)
    root = repo.TreeBuilder()
    root.insert("memories", memories, FileMode.TREE)
    root.insert("gitmem.yaml", repo.create_blob(b"format: 2\n"), FileMode.BLOB)
    return root.write()


def _loose(objects: Path) -> dict[str, int]:
    out = {}
    for fan in objects.iterdir():
        if len(fan.name) == 2 and fan.is_dir():
            for entry in fan.iterdir():
                out[fan.name + entry.name] = entry.stat().st_size
    return out


def create(repo: pygit2.Repository, layout: str, memory_id: str) -> None:
    """One create as gitmem's write does it: blob, the trees on its path, commit, ref."""
    parent = repo.head.peel(pygit2.Commit)
    body = BODY.format(id=memory_id).encode()
    blob = repo.create_blob(body)
    parts = ["memories", *split(layout, memory_id)]
    trees: list[pygit2.Tree | None] = [parent.tree]
    for part in parts:
        current = trees[-1]
        found = current is not None and part in current
        trees.append(repo[current[part].id] if found else None)  # type: ignore[index,arg-type]
    child, mode = blob, FileMode.BLOB
    name = f"{memory_id}.md"
    for depth in range(len(parts), -1, -1):
        existing = trees[depth]
        builder = repo.TreeBuilder(existing) if existing is not None else repo.TreeBuilder()
        builder.insert(name, child, mode)
        child, mode = builder.write(), FileMode.TREE
        name = parts[depth - 1] if depth else ""
    signature = pygit2.Signature("bench", "bench@example.invalid", 1_764_147_600, 0)
    commit = repo.create_commit(None, signature, signature, "create", child, [parent.id])
    repo.references.create("refs/heads/main", commit, force=True)


def _added(objects: Path, before: dict[str, int]) -> int:
    """Bytes of the loose objects written since ``before`` was listed."""
    return sum(size for oid, size in _loose(objects).items() if oid not in before)


def _summary(built: float, times: list[float], added: int, file_bytes: int) -> dict[str, float]:
    times = sorted(times)
    return {
        "build_s": built,
        "p50_us": statistics.median(times) * 1e6,
        "p90_us": times[int(len(times) * 0.9)] * 1e6,
        "loose_bytes": added / len(times),
        "ratio": added / file_bytes,
    }


def measure(layout: str, size: int, creates: int, seed: int) -> dict[str, float]:
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="gitmem-layout-") as tmp:
        repo = pygit2.init_repository(tmp, bare=True, initial_head="main")
        pygit2.option(Option.ENABLE_STRICT_OBJECT_CREATION, False)
        started = time.perf_counter()
        tree = build(repo, layout, size, rng)
        signature = pygit2.Signature("bench", "bench@example.invalid", 1_764_147_600, 0)
        repo.create_commit("refs/heads/main", signature, signature, "base", tree, [])
        built = time.perf_counter() - started
        pygit2.option(Option.ENABLE_STRICT_OBJECT_CREATION, True)
        objects = Path(tmp) / "objects"
        before = _loose(objects)
        times = []
        file_bytes = 0
        for _ in range(creates):
            memory_id = _new_id(rng)
            file_bytes += len(BODY.format(id=memory_id).encode())
            t0 = time.process_time()  # CPU time: the machine is shared; see the docstring
            create(repo, layout, memory_id)
            times.append(time.process_time() - t0)
        added = _added(objects, before)
    return _summary(built, times, added, file_bytes)


STORE_LAYOUTS = {3: "256", 4: "16x4"}
"""The layout each store format writes new memories in."""


def measure_store(fmt: int, size: int, creates: int, seed: int) -> dict[str, float]:
    """:func:`measure`, with gitmem's ``Store.create`` into a real bare store of ``fmt``."""
    import gitmem
    from bench.fixtures import fields_for, populate

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="gitmem-layout-store-") as tmp:
        path = Path(tmp) / "store.git"
        started = time.perf_counter()
        populate(path, size, bare=True, rng=rng, format=fmt)
        built = time.perf_counter() - started
        repo = pygit2.Repository(str(path))
        repo.config["gc.auto"] = "0"  # honoured by the store's packer: count every byte
        store = gitmem.open(path)
        store.index().catch_up()
        pool = [fields_for(size + i, rng) for i in range(creates)]
        objects = path / "objects"
        before = _loose(objects)
        times = []
        file_bytes = 0
        for fields in pool:
            t0 = time.process_time()
            memory = store.create(fields.body, **fields.create_kwargs())
            times.append(time.process_time() - t0)
            assert memory.path is not None
            file_bytes += len(store.stored_file(memory.id) or b"")
        added = _added(objects, before)
    return _summary(built, times, added, file_bytes)


def measure_migrate(size: int, seed: int) -> dict[str, float]:
    """Wall and CPU seconds of ``migrate(store, to=4)`` on an indexed format 3 store of
    ``size``, and of the index's first catch-up after it (the rename of every file)."""
    import gitmem
    from bench.fixtures import populate
    from gitmem.features.migrate import migrate

    rng = random.Random(seed)
    with tempfile.TemporaryDirectory(prefix="gitmem-migrate-") as tmp:
        path = Path(tmp) / "store.git"
        populate(path, size, bare=True, rng=rng, format=3)
        store = gitmem.open(path)
        store.index().catch_up()
        wall, cpu = time.perf_counter(), time.process_time()
        (step,) = migrate(store, to=4)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        assert step.moved_count == size, step.moved_count
        index_wall = time.perf_counter()
        gitmem.open(path).index().catch_up()
        index_wall = time.perf_counter() - index_wall
    return {
        "wall_s": wall,
        "cpu_s": cpu,
        "moved": float(step.moved_count),
        "index_s": index_wall,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,100000,1000000")
    parser.add_argument("--creates", type=int, default=200)
    parser.add_argument("--layouts", default=",".join(LAYOUTS))
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--store",
        action="store_true",
        help="gitmem's Store.create, format 3 vs 4, beside the floor",
    )
    parser.add_argument("--migrate", type=int, default=0, help="time migrate --to 4 at N memories")
    args = parser.parse_args(argv)
    load = os.getloadavg()[0]
    version = getattr(pygit2, "__version__", "?")
    if args.migrate:
        print(f"load average {load:.2f}; migrate --to 4 of a format 3 store of {args.migrate:,}")
        row = measure_migrate(args.migrate, args.seed)
        print(
            f"moved {row['moved']:,.0f} files in {row['wall_s']:.1f} s wall, "
            f"{row['cpu_s']:.1f} s CPU; the index caught up in {row['index_s']:.1f} s; "
            f"load average at the end {os.getloadavg()[0]:.2f}"
        )
        return 0
    print(f"load average {load:.2f}; {args.creates} creates per cell; pygit2 {version}")
    if args.store:
        print("| memories | what | create p50 µs CPU | p90 µs CPU | loose bytes per create |")
        print("|---:|---|---:|---:|---:|")
        for size in (int(s) for s in args.sizes.split(",")):
            for fmt, layout in STORE_LAYOUTS.items():
                cells = (
                    (
                        f"format {fmt} Store.create",
                        measure_store(fmt, size, args.creates, args.seed),
                    ),
                    (f"floor, {layout}", measure(layout, size, args.creates, args.seed)),
                )
                for what, row in cells:
                    print(
                        f"| {size:,} | {what} | {row['p50_us']:,.0f} | {row['p90_us']:,.0f} | "
                        f"{row['loose_bytes']:,.0f} |",
                        flush=True,
                    )
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
        return 0
    print(
        "| memories | layout | create p50 µs CPU | p90 µs CPU | loose bytes per create "
        "| x file bytes |"
    )
    print("|---:|---|---:|---:|---:|---:|")
    for size in (int(s) for s in args.sizes.split(",")):
        for layout in args.layouts.split(","):
            row = measure(layout, size, args.creates, args.seed)
            print(
                f"| {size:,} | {layout} | {row['p50_us']:,.0f} | {row['p90_us']:,.0f} | "
                f"{row['loose_bytes']:,.0f} | {row['ratio']:.1f} |",
                flush=True,
            )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
