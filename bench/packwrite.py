"""A create's objects written loose (what libgit2 does today) or as one pack per commit.

Issue 17's single create is at ~0.54 of the bare-pygit2 floor's CPU and 8 writers commit
less than one; a py-spy sample put the difference with 8 writers in the object writes
(each a temporary file and a rename in a shared fan-out folder). This measures the lever
before it is built: the objects of real creates on a populated store (a blob, the trees on
its path, a commit: what ``bench.scenarios.pygit2_create`` writes), made once in memory,
then written round by round into two bare repositories, alternating:

- ``loose``: ``Odb.write`` per object, as every gitmem write does now;
- ``pack``: one pack and its index per commit (``--split``: two, the writer's blob and
  folder trees and the leader's root, ``memories/`` and commit, as group commit would),
  written here in Python (no deltas, zlib level 1), with small packs merged
  geometrically: every ``--merge`` packs of one level are copied (records as they are,
  no recompression) into one pack of the next level and deleted.

``--repack N`` counts what the automatic packer does afterwards too: both repositories
start as copies of the populated store, and every N commits each side is repacked by git,
timed with it (the loose side ``git repack -d -l``, which deletes the loose objects; the
pack side ``git repack -a -d -l -k --keep-pack=<largest>``, which rolls the small packs up).

It reports user and system CPU a commit (medians of the rounds), the median per-round ratio,
packs left and bytes on disk, and the cost of reading every object back through each
repository. Nothing here is gitmem's code yet: it is the measurement a pack writer in
``gitmem.git`` would be built against (docs/benchmarks.md, "Objects as packs: the probe")::

    python -m bench.packwrite --size 1000 --rounds 20 --ops 50 --merge 8
    python -m bench.packwrite --size 1000 --rounds 40 --ops 50 --merge 8 --repack 500
"""

from __future__ import annotations

import argparse
import binascii
import hashlib
import os
import random
import resource
import shutil
import statistics
import struct
import subprocess
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import pygit2

from bench.fixtures import fields_for, memory_text, new_memory_id, populate
from bench.scenarios import pygit2_commit
from gitmem.base.clock import SystemClock
from gitmem.format.layout import memory_path
from gitmem.git import autopack

Objects = list[tuple[int, bytes]]
"""One commit's objects as (git type number, bytes): blob, trees leaf to root, commit."""

_TYPE_NAMES = {1: b"commit", 2: b"tree", 3: b"blob"}


class _Capture(pygit2.OdbBackend):
    """An object database in memory: the first backend of a repository made to collect the
    objects of creates without writing them (reads fall through to the store's packs and
    loose objects)."""

    def __init__(self) -> None:
        super().__init__()
        self.objects: dict[bytes, tuple[int, bytes]] = {}
        self.order: list[bytes] = []

    def read_cb(self, oid: pygit2.Oid) -> tuple[int, bytes]:
        found = self.objects.get(oid.raw)
        if found is None:
            raise KeyError(oid)
        return found

    def read_prefix_cb(self, prefix: Any) -> tuple[int, bytes, pygit2.Oid]:
        hits = [raw for raw in self.objects if raw.hex().startswith(str(prefix))]
        if len(hits) != 1:
            raise KeyError(prefix)
        kind, data = self.objects[hits[0]]
        return kind, data, pygit2.Oid(raw=hits[0])

    def read_header_cb(self, oid: pygit2.Oid) -> tuple[int, int]:
        kind, data = self.read_cb(oid)
        return kind, len(data)

    def exists_cb(self, oid: pygit2.Oid) -> bool:
        return oid.raw in self.objects

    def exists_prefix_cb(self, prefix: Any) -> pygit2.Oid:
        raise KeyError(prefix)

    def write_cb(self, oid: pygit2.Oid, data: bytes, kind: int) -> None:
        if oid.raw not in self.objects:
            self.order.append(oid.raw)
        self.objects[oid.raw] = (kind, bytes(data))

    def refresh_cb(self) -> None:
        pass

    def take(self) -> Objects:
        out = [self.objects[raw] for raw in self.order]
        self.objects.clear()
        self.order.clear()
        return out


def _capturing(gitdir: Path) -> tuple[pygit2.Repository, _Capture]:
    repo = pygit2.Repository(str(gitdir))
    capture = _Capture()
    odb = pygit2.Odb()
    odb.add_backend(capture, 3)
    odb.add_backend(pygit2.OdbBackendPack(str(gitdir / "objects")), 2)
    odb.add_backend(pygit2.OdbBackendLoose(str(gitdir / "objects"), 0, False), 1)
    repo.set_odb(odb)
    return repo, capture


def _create_objects(
    repo: pygit2.Repository,
    capture: _Capture,
    store: pygit2.Repository,
    parent: pygit2.Commit,
    rel: str,
    data: bytes,
    message: str,
    signature: pygit2.Signature,
) -> tuple[pygit2.Commit, Objects]:
    """``bench.scenarios.pygit2_create``'s objects, on ``parent``, without moving a branch."""
    oid = pygit2_commit(repo, parent, rel, data, message, signature)
    commit = repo[oid].peel(pygit2.Commit)
    objects = capture.take()
    for kind, body in objects:  # the next create reads these trees
        store.odb.write(kind, body)
    return commit, objects


def _header(kind: int, size: int) -> bytes:
    out = bytearray()
    byte = (kind << 4) | (size & 15)
    size >>= 4
    while size:
        out.append(byte | 0x80)
        byte = size & 0x7F
        size >>= 7
    out.append(byte)
    return bytes(out)


Record = tuple[bytes, int, bytes]
"""(object id, CRC-32 of the record, the record as it sits in a pack)."""


def _records(objects: Objects) -> list[Record]:
    out = []
    for kind, data in objects:
        oid = hashlib.sha1(b"%s %d\0" % (_TYPE_NAMES[kind], len(data)) + data).digest()
        record = _header(kind, len(data)) + zlib.compress(data, 1)
        out.append((oid, binascii.crc32(record), record))
    return out


def _write_pack(folder: Path, records: list[Record]) -> Path:
    """A version-2 pack and index of ``records``, each renamed into place (the index last,
    so no reader sees a pack without its objects)."""
    parts = [b"PACK", struct.pack(">II", 2, len(records))]
    offset = 12
    entries = []
    for oid, crc, record in records:
        entries.append((oid, crc, offset))
        offset += len(record)
        parts.append(record)
    pack = b"".join(parts)
    checksum = hashlib.sha1(pack).digest()
    pack += checksum
    entries.sort()
    fanout = [0] * 256
    for oid, _, _ in entries:
        fanout[oid[0]] += 1
    for i in range(1, 256):
        fanout[i] += fanout[i - 1]
    n = len(entries)
    index = b"".join(
        (
            b"\xfftOc",
            struct.pack(">I", 2),
            struct.pack(">256I", *fanout),
            b"".join(oid for oid, _, _ in entries),
            struct.pack(f">{n}I", *(crc for _, crc, _ in entries)),
            struct.pack(f">{n}I", *(off for _, _, off in entries)),
            checksum,
        )
    )
    index += hashlib.sha1(index).digest()
    base = folder / f"pack-{checksum.hex()}"
    for suffix, data in ((".pack", pack), (".idx", index)):
        fd, temp = tempfile.mkstemp(dir=folder, prefix="tmp_pack_")
        with os.fdopen(fd, "wb") as out:
            out.write(data)
        os.chmod(temp, 0o444)  # noqa: PTH101 (as git leaves its packs)
        os.rename(temp, f"{base}{suffix}")  # noqa: PTH104
    return base


def _read_records(base: Path) -> list[Record]:
    index = Path(f"{base}.idx").read_bytes()
    n = struct.unpack(">I", index[8 + 255 * 4 : 8 + 256 * 4])[0]
    start = 8 + 256 * 4
    oids = [index[start + 20 * i : start + 20 * i + 20] for i in range(n)]
    crcs = struct.unpack(f">{n}I", index[start + 20 * n : start + 24 * n])
    offsets = struct.unpack(f">{n}I", index[start + 24 * n : start + 28 * n])
    pack = Path(f"{base}.pack").read_bytes()
    order = sorted(range(n), key=lambda i: offsets[i])
    ends = [offsets[j] for j in order[1:]] + [len(pack) - 20]
    return [(oids[i], crcs[i], pack[offsets[i] : end]) for i, end in zip(order, ends, strict=True)]


class _Packer:
    """One pack per call, merged geometrically: ``merge`` packs of a level make one of the
    next (each object is copied about log_merge(commits) times before git's own repack)."""

    def __init__(self, gitdir: Path, merge: int) -> None:
        self.folder = gitdir / "objects" / "pack"
        self.merge = merge
        self.levels: list[list[Path]] = [[]]

    def write(self, objects: Objects) -> None:
        self.levels[0].append(_write_pack(self.folder, _records(objects)))
        level = 0
        while len(self.levels[level]) >= self.merge:
            records: dict[bytes, Record] = {}
            for base in self.levels[level]:
                for record in _read_records(base):
                    records.setdefault(record[0], record)
            merged = _write_pack(self.folder, list(records.values()))
            for base in self.levels[level]:
                if base != merged:
                    Path(f"{base}.idx").unlink()
                    Path(f"{base}.pack").unlink()
            self.levels[level] = []
            if len(self.levels) == level + 1:
                self.levels.append([])
            self.levels[level + 1].append(merged)
            level += 1

    def count(self) -> int:
        return sum(len(level) for level in self.levels)


def _cpu() -> tuple[float, float]:
    """This process's CPU so far, user and system, its reaped children's (git) included."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + children.ru_utime, usage.ru_stime + children.ru_stime


def _repack(gitdir: Path, name: str, packer: _Packer) -> None:
    """What the automatic packer does once enough has piled up: loose objects into a pack
    of their own (deleting them), or the small packs rolled into one (deleting them)."""
    command = ["git", "-C", str(gitdir), "repack", "-d", "-l", "-q", "--window=4"]
    if name == "pack":
        largest = max((gitdir / "objects" / "pack").glob("*.pack"), key=lambda p: p.stat().st_size)
        command += ["-a", "-k", f"--keep-pack={largest.name}"]
        packer.levels = [[]]
    subprocess.run(command, check=True)


def _apparent(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--ops", type=int, default=50)
    parser.add_argument("--merge", type=int, default=8)
    parser.add_argument("--split", action="store_true", help="two packs a commit")
    parser.add_argument(
        "--repack", type=int, default=0,
        help="every N commits, repack each side with git as the automatic packer would "
        "(deleting the loose objects, or the small packs); timed with the side",
    )
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    print(
        f"load average {os.getloadavg()[0]:.2f}; {args.size:,} memories; "
        f"{'two packs' if args.split else 'one pack'} a commit, merged by {args.merge}"
    )
    with tempfile.TemporaryDirectory(prefix="gitmem-packwrite-") as tmp:
        source = Path(tmp) / "store.git"
        populate(source, args.size, bare=True, rng=rng)
        repo, capture = _capturing(source)
        store = pygit2.Repository(str(source))
        parent = repo.lookup_reference("refs/heads/main").peel(pygit2.Commit)
        signature = pygit2.Signature("bench", "bench@bench.invalid")
        targets = {}
        for name in ("loose", "pack"):
            target = Path(tmp) / f"{name}.git"
            if args.repack:  # a history git can walk: the store itself, in one pack
                deadline = time.monotonic() + 300
                while autopack._busy(source) and time.monotonic() < deadline:
                    time.sleep(0.1)  # the import's own packing moves files under the copy
                shutil.copytree(source, target)
                subprocess.run(["git", "-C", str(target), "repack", "-a", "-d", "-q"], check=True)
            else:
                pygit2.init_repository(str(target), bare=True)
            targets[name] = pygit2.Repository(str(target))
        packer = _Packer(Path(targets["pack"].path), args.merge)
        per: dict[str, list[tuple[float, float]]] = {"loose": [], "pack": []}
        done = 0
        written: list[bytes] = []
        for number in range(args.rounds + 1):  # round 0 warms both up, untimed
            commits = []
            for i in range(args.ops):
                fields = fields_for(args.size + number * args.ops + i, rng)
                memory_id = new_memory_id(rng)
                text = memory_text(memory_id, fields, created=SystemClock().now())
                message = f"create: {fields.title}\n\nGitmem-Op: create\nGitmem-Id: {memory_id}\n"
                parent, objects = _create_objects(
                    repo,
                    capture,
                    store,
                    parent,
                    memory_path(memory_id),
                    text.encode(),
                    message,
                    signature,
                )
                commits.append(objects)
            for objects in commits:
                written += [
                    hashlib.sha1(b"%s %d\0" % (_TYPE_NAMES[k], len(d)) + d).digest()
                    for k, d in objects
                ]
            for name in ("loose", "pack") if number % 2 else ("pack", "loose"):
                user, system = _cpu()
                if name == "loose":
                    odb = targets["loose"].odb
                    for objects in commits:
                        for kind, data in objects:
                            odb.write(kind, data)
                else:
                    for objects in commits:
                        if args.split:  # the writer's blob and folders; the leader's rest
                            packer.write(objects[:-3])
                            packer.write(objects[-3:])
                        else:
                            packer.write(objects)
                if args.repack:
                    tip = hashlib.sha1(
                        b"commit %d\0" % len(commits[-1][-1][1]) + commits[-1][-1][1]
                    ).hexdigest()
                    targets[name].references.create("refs/heads/main", tip, force=True)
                    if (done + args.ops) // args.repack > done // args.repack:
                        _repack(Path(targets[name].path), name, packer)
                end_user, end_system = _cpu()
                if number:
                    per[name].append((end_user - user, end_system - system))
            done += args.ops
        ratios = sorted(
            (loose[0] + loose[1]) / (pack[0] + pack[1])
            for loose, pack in zip(per["loose"], per["pack"], strict=True)
        )
        quarter = len(ratios) // 4
        commits_timed = args.rounds * args.ops
        for name, rows in per.items():
            total = sum(u + s for u, s in rows) / commits_timed * 1e6
            print(f"{name:5s} all rounds (repacks included): {total:,.0f} µs CPU a commit")
        for name, rows in per.items():
            user_us = statistics.median(u for u, _ in rows) / args.ops * 1e6
            system_us = statistics.median(s for _, s in rows) / args.ops * 1e6
            print(
                f"{name:5s} µs CPU a commit: user {user_us:,.0f}, system {system_us:,.0f}, "
                f"total {user_us + system_us:,.0f}; on disk "
                f"{_apparent(Path(targets[name].path) / 'objects'):,} bytes"
            )
        print(
            f"loose / pack, CPU per round: median {statistics.median(ratios):.2f} "
            f"(quartiles {ratios[quarter]:.2f}-{ratios[-quarter - 1]:.2f}); "
            f"{packer.count()} packs left"
        )
        for name in ("loose", "pack"):
            reader = pygit2.Repository(targets[name].path)
            started = time.perf_counter()
            for raw in written:
                reader.odb.read(pygit2.Oid(raw=raw))
            took = (time.perf_counter() - started) / len(written) * 1e6
            print(f"{name:5s} reading every object back: {took:.1f} µs an object")
        print(f"load average at the end {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
