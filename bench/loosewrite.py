"""What one loose object costs to write, alone and with 8 processes writing at once.

Every gitmem write (and the bare-pygit2 floor it is compared with) writes its blob, the
trees on its path and its commit as loose objects, one file each. This measures that file
on this machine: ``--objects`` 300-byte blobs written into a fresh bare repository by 1 and
by 8 spawned processes, through libgit2 (``Repository.create_blob``: a temporary file in
``objects/``, linked into its fan-out folder) and through a plain Python writer that makes
its temporary file in the fan-out folder itself, as git does (so eight writers do not all
create and delete files in one directory). CPU time per object, user and system; every
object the Python writer made is then read back by libgit2::

    python -m bench.loosewrite --rounds 3
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
import random
import resource
import statistics
import tempfile
import time
import zlib
from multiprocessing.synchronize import Barrier
from typing import Any

import pygit2

from bench.harness import run_spawned


def _python_write(objects: str, data: bytes) -> None:
    raw = b"blob %d\0" % len(data) + data
    oid = hashlib.sha1(raw).hexdigest()  # git's object id
    fan = os.path.join(objects, oid[:2])  # noqa: PTH118 (str paths: per object)
    final = os.path.join(fan, oid[2:])  # noqa: PTH118
    if os.path.exists(final):  # noqa: PTH110
        return
    with contextlib.suppress(FileExistsError):
        os.mkdir(fan)  # noqa: PTH102
    tmp = os.path.join(fan, f"tmp_obj_{os.getpid()}_{oid[:8]}")  # noqa: PTH118
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o444)
    try:
        os.write(fd, zlib.compress(raw, 1))
    finally:
        os.close(fd)
    with contextlib.suppress(FileExistsError):
        os.link(tmp, final)
    os.unlink(tmp)  # noqa: PTH108


def _writer(path: str, mode: str, count: int, seed: int, barrier: Barrier, out: Any) -> None:
    repo = pygit2.Repository(path)
    rng = random.Random(seed)
    blobs = [rng.randbytes(300) for _ in range(count)]
    objects = os.path.join(path, "objects")  # noqa: PTH118
    barrier.wait()
    before = resource.getrusage(resource.RUSAGE_SELF)
    for data in blobs:
        if mode == "libgit2":
            repo.create_blob(data)
        else:
            _python_write(objects, data)
    after = resource.getrusage(resource.RUSAGE_SELF)
    out.put((after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime))


def _round(mode: str, processes: int, objects: int, seed: int) -> tuple[float, float]:
    """(user, system) µs of CPU an object."""
    with tempfile.TemporaryDirectory(prefix="gitmem-loosewrite-") as tmp:
        path = os.path.join(tmp, "repo.git")  # noqa: PTH118
        pygit2.init_repository(path, bare=True)
        each = objects // processes
        results = run_spawned(_writer, [(path, mode, each, seed + i) for i in range(processes)])
        written = each * processes
        if mode == "python":
            repo = pygit2.Repository(path)
            readable = sum(1 for oid in repo.odb if len(repo.odb.read(oid)[1]) == 300)
            assert readable == written, f"{readable} of {written} read back"
    return (
        1e6 * sum(r[0] for r in results) / written,
        1e6 * sum(r[1] for r in results) / written,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=4000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)
    found: dict[tuple[str, int], list[tuple[float, float]]] = {}
    for number in range(args.rounds):
        for processes in (1, 8):
            modes = ("libgit2", "python") if number % 2 == 0 else ("python", "libgit2")
            for mode in modes:
                user, system = _round(mode, processes, args.objects, 10 * number)
                found.setdefault((mode, processes), []).append((user, system))
                print(
                    f"round {number + 1}, {processes} process(es), {mode}: "
                    f"{user + system:.0f} µs of CPU an object ({user:.0f} user, "
                    f"{system:.0f} system); load {os.getloadavg()[0]:.1f}, "
                    f"{time.strftime('%H:%M:%S', time.gmtime())}",
                    flush=True,
                )
    print("medians (µs of CPU an object, user + system):")
    for (mode, processes), rows in found.items():
        total = statistics.median(u + s for u, s in rows)
        print(f"  {processes} process(es), {mode}: {total:.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
