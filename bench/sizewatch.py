"""A store's size watched from beside a run: every ``interval`` seconds, its apparent size,
loose objects and packs, beside the writer's count of creates and raw bytes so far.

Issue 17's size bound holds "at every moment", and a roll-up's copy of the small packs lives
for one to four seconds: samples taken every N/40 creates (one every ~4 s at 100k on tmpfs)
said 2.20x where this watcher saw 2.94x in the same run (docs/benchmarks.md, "Session
21"). The watcher is a process of its own, so its walk of the store (a ``stat`` a loose
object) does not hold the writer's interpreter lock; the writer hands it its counts through
a small shared file (:class:`Watch`).

Run as ``python -m bench.sizewatch GITDIR SHARED OUT INTERVAL`` by :class:`Watch` only.
"""

from __future__ import annotations

import mmap
import os
import struct
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gitmem.base import paths

_SHARED = struct.Struct("<qqq")
"""creates so far, raw bytes so far, stop (non-zero: the watcher leaves)."""


@dataclass(frozen=True)
class Sample:
    creates: int
    apparent: int
    raw: int
    loose: int
    packs: int
    at: float = 0.0
    """``time.monotonic()`` when the watcher took it (0: taken by the writer)."""

    @property
    def ratio(self) -> float:
        return self.apparent / self.raw if self.raw else 0.0


def apparent_size(gitdir: Path) -> tuple[int, int, int]:
    """(apparent bytes, loose objects, packs) of a git directory, without gitmem's state."""
    state = paths.state_dir(gitdir)
    total = loose = packs = 0
    for root, dirs, files in os.walk(gitdir):
        here = Path(root)
        if here == state:
            dirs.clear()
            continue
        fanout = here.parent.name == "objects" and len(here.name) == 2
        for name in files:
            try:
                total += (here / name).lstat().st_size
            except FileNotFoundError:
                continue
            loose += fanout
            packs += here.name == "pack" and name.endswith(".pack")
    return total, loose, packs


class Watch:
    """The watcher process for ``gitdir``, started on entry; :meth:`update` after each
    create, :meth:`stop` for its samples (oldest first)."""

    def __init__(self, gitdir: Path, scratch: Path, interval: float = 0.25) -> None:
        self.gitdir = gitdir
        self.interval = interval
        self._shared_path = scratch / "sizewatch.shared"
        self._out_path = scratch / "sizewatch.samples"
        self._shared_path.write_bytes(bytes(_SHARED.size))
        self._file = self._shared_path.open("r+b")
        self._map = mmap.mmap(self._file.fileno(), _SHARED.size)
        self._process: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Watch:
        # The bench's own tree first on the path, as `python -m bench` has it.
        root = str(Path(__file__).resolve().parents[1])
        path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
        env = {**os.environ, "PYTHONPATH": path}
        self._process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.sizewatch",
                str(self.gitdir),
                str(self._shared_path),
                str(self._out_path),
                str(self.interval),
            ],
            env=env,
        )
        return self

    def __exit__(self, *exc: object) -> None:
        self._halt()

    def update(self, creates: int, raw: int) -> None:
        _SHARED.pack_into(self._map, 0, creates, raw, 0)

    def _halt(self) -> None:
        """The watcher told to leave and waited for (once)."""
        if self._process is None:
            return
        creates, raw, _ = _SHARED.unpack_from(self._map, 0)
        _SHARED.pack_into(self._map, 0, creates, raw, 1)
        try:
            self._process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._process = None
        self._map.close()
        self._file.close()

    def stop(self) -> list[Sample]:
        """The watcher told to leave and waited for; its samples."""
        self._halt()
        if not self._out_path.exists():
            return []
        samples = []
        for line in self._out_path.read_text().splitlines():
            at, creates, raw, apparent, loose, packs = line.split()
            samples.append(
                Sample(int(creates), int(apparent), int(raw), int(loose), int(packs), float(at))
            )
        return samples


def _watch(gitdir: Path, shared: Path, out: Path, interval: float) -> None:
    with shared.open("rb") as fh, out.open("w") as sink:
        view = mmap.mmap(fh.fileno(), _SHARED.size, access=mmap.ACCESS_READ)
        while True:
            creates, raw, stop = _SHARED.unpack_from(view, 0)
            if stop:
                return
            if creates:
                at = time.monotonic()
                try:
                    apparent, loose, packs = apparent_size(gitdir)
                except OSError:  # a directory gone in the middle of the walk: next time
                    pass
                else:
                    sink.write(f"{at:.3f} {creates} {raw} {apparent} {loose} {packs}\n")
                    sink.flush()
            time.sleep(interval)


if __name__ == "__main__":
    _watch(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]), float(sys.argv[4]))
