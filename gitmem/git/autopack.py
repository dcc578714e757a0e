"""Automatic packing: the store keeps itself packed the way ``git gc --auto`` would.

pygit2 writes every object loose (a blob, the trees along its path and a commit per
write, 4-6 KiB on disk each), and git's own ``gc --auto`` never runs because no git
command ever writes to a store. So after each write that moved the branch,
:func:`after_write` asks, cheaply, whether packing is due, with git's own rules:

- loose objects: git estimates them from one of the 256 fan-out directories
  (``objects/17``) and packs when the estimate passes ``gc.auto``. When git's config
  does not set it, gitmem's count starts at 2,048 and grows with the packs, one loose
  object per 4 KiB packed, up to 4,096 (:meth:`Thresholds.loose_limit`);
- packs: more than ``gc.autoPackLimit`` packs without a ``.keep`` (10 when git's config
  sets none, where git's own default is 50: :data:`DEFAULT_PACK_LIMIT`);
- ``gc.auto`` of 0 or less turns both off, for people who run ``git gc`` (or
  ``git maintenance``) themselves; ``gc.autoPackLimit`` of 0 turns off the pack rule.

When it is due, the writer starts one detached helper process
(``python -m gitmem.git.autopack <gitdir>``) and returns: the check is a directory
listing of ~30 names, and starting the helper costs the writer about a millisecond
once every ~400 single creates. The helper takes ``<gitdir>/gitmem/autopack.lock``
(an ``flock``: one helper per store, released by the kernel if it dies) and, through
:func:`gitmem.git.command.run_git`, runs what ``git gc --auto`` would until nothing is due:
``git repack -d -l`` for loose objects (one new pack of them; ``--window=4`` unless
git's config sets ``pack.window``: :data:`DELTA_WINDOW`; one thread unless it sets
``pack.threads``: :data:`LOOSE_THREADS`; glibc's allocator told to keep what it frees:
:data:`MALLOC_TUNABLES`), ``git repack -a -d -l
-k`` (all but the largest pack into one) for too many packs, or when the loose objects left are
unreachable ones. Past :data:`BOUNDED_FROM` of packs the loose repack packs only what is new
since the last one, and too many packs roll up only the smallest few (:func:`roll_selection`),
so neither walks the whole history: by the span of history they hold when the helper made
every one of them, one span after another (``autopack.spans``, :func:`span_run`: no walk of
a whole tree either), otherwise by name (``git pack-objects --stdin-packs``). Such a
roll-up runs in a thread of the helper (:class:`_Roller`) while the helper goes on packing
loose objects beside it, from half the usual count (a loose repack takes twice as long
beside it); the helper counts loose objects in sixteen fan-out directories as well as git's
one (:data:`WIDE_SAMPLE`). ``git repack --geometric=2`` was measured too: git 2.39 packs
loose objects into it without their names, so trees found poor delta bases and its packs
were twice the size (docs/reliability.md has the figures); the roll-up here leaves loose
objects to the loose repack.

Why this is safe to race and to kill: ``git repack`` writes a new pack under a
temporary name and renames it into place (the ``.idx`` last, so a pack is never
visible half-written), and only then deletes what it made redundant (loose objects
and rolled-up packs that are now in the new pack). Nothing is ever deleted that is
not in a pack already, and unreachable objects are kept (a concurrent writer's
objects are unreachable until its branch update lands). A kill at any moment leaves
at most a ``tmp_pack_*`` file that no reader sees; the next run works as before. The
small-pack roll-up keeps to the same order: its new pack is in place before the packs it
holds are deleted (a kill between leaves the objects twice, which is harmless), and each
goes ``.idx`` first, so a kill half-way leaves a ``.pack`` no reader lists, not counted
(:func:`pack_count`), and kept by ``git gc``: the next helper deletes it
(:func:`_finish_deleting`, from the names :func:`_delete_packs` wrote first). A roll-up by span
deletes the packs it took only once their indexes show every object they hold in the new
pack (:func:`_covers`): the record of spans only ever saves work, never decides what is kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import mmap
import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gitmem.base import logs, paths
from gitmem.base.errors import StoreError
from gitmem.git.locks import try_flock

log = logs.get(__name__)

LOCK_NAME = paths.AUTOPACK_LOCK
LAST_NAME = paths.AUTOPACK_LAST
TIPS_NAME = paths.AUTOPACK_TIPS
SPANS_NAME = paths.AUTOPACK_SPANS
DELETING_NAME = paths.AUTOPACK_DELETING
ORPHAN_AGE = 60.0
"""Seconds a ``.pack`` named in :data:`DELETING_NAME` must have been left alone (its mtime)
before a helper deletes it: git renames a new pack into place a moment before its index, and
a pack of the very same objects has the same name."""
GIT_DEFAULT_AUTO = 6700
"""git's default ``gc.auto``."""
DEFAULT_AUTO = 2048
"""Where gitmem's loose-object count starts when git's config sets no ``gc.auto``. A
gitmem write's objects are larger than a typical commit's (every create rewrites the
256-entry ``memories/`` tree and a shard tree: ~5.5 KB of loose objects per create at 5k
memories), so git's 6,700 left a store of 10k memories at ~4x its raw size between packs;
2,048 keeps it under 3x (docs/reliability.md, "Automatic packing")."""
BYTES_PER_LOOSE = 4096
"""...and it grows with the store: one loose object allowed per this many bytes packed,
up to :data:`GROWN_AUTO` (:meth:`Thresholds.loose_limit`). A repack's cost is a fixed part
(git's start-up and walk: ~0.4 s at 100k memories) plus ~0.3 ms a loose object, so at 100k
a count held at 2,048 (a repack every ~400 creates) spent about as much CPU packing as
creating (docs/benchmarks.md, "Session 14")."""
GROWN_AUTO = 4096
"""Where the growing count stops, below git's 6,700 (the issue's bound on loose objects at
any moment): the estimate from one fan-out folder is rough (a sample of ~16-27 files), and
writers go on adding ~1,000 loose objects a second during a repack of a few seconds. Let
grow to 6,700, 12 of 40 samples of a 100k run found more than 6,700 loose objects."""
LOOSE_SHARE = 0.5
"""Packing is due when the loose objects take more room than this share of the packs
(:func:`loose_outweighs_packs`), so the store stays within ~1.5x its packed size. It binds
in small stores only (at 10k and beyond the count does first). 1.0 was tried twice (docs/
benchmarks.md, sessions 13 and 14): eight writers' packing helpers at 1k went from ~1.6 to
~1.15 ms a commit, but a young store's worst moment rose to 2.90x its raw size."""
MIN_LOOSE_BYTES = 256 * 1024
"""...and at least this much (estimated): a new store packs once it holds a few hundred KB."""
MIN_LOOSE_SAMPLE = 2
"""...from at least this many loose objects in the sample, so one object landing in
``objects/17`` does not start a helper."""
DEFAULT_PACK_LIMIT = 10
"""The packs that make the roll-up due when git's config sets no ``gc.autoPackLimit``
(git's own default: 50).
libgit2 looks every object a write makes up in each pack before writing it (and every
object it reads in each pack until found): a create into a 10k store cost ~1.8 ms of CPU
with up to 10 packs, 2.1 with 25 and 2.5 with 50 (docs/benchmarks.md, "Session 15"), and
the store passes through every count from 2 up to the limit between two roll-ups. A
roll-up keeps the largest pack, so it costs git's walk and the copy of the small ones."""
PACKS_REASON = "packs (gc.autoPackLimit"
SAMPLE_DIR = "17"
"""The fan-out directory git samples to estimate the loose objects (``gc.c``)."""
WIDE_SAMPLE = tuple(f"{i:02x}" for i in range(0x10, 0x20))
"""The fan-out directories the helper counts as well (1/16 of the store's loose objects),
for its own look at what is due (:func:`due` with ``wide``): git's sample of one directory
holds ~16 objects at 4,096, and at ~5,000 new loose objects a second its noise started
loose repacks anywhere between ~3,000 and ~7,000 (docs/benchmarks.md, "Session 20")."""
CONFIG_TTL = 30.0
"""Seconds a long-lived writer trusts the thresholds it read from git's config."""
RETRY_AFTER_SUCCESS = 0.25
RETRY_AFTER_FAILURE = 60.0
MAX_ROUNDS = 8
"""Repacks one helper runs in a row at most before it leaves the rest to the next one (or,
lingering, lets the lock go and looks again: :data:`LINGER`)."""
LINGER = 3.0
"""Seconds a helper the writer started stays after its repacks, watching for the next one
due (:func:`_next_due`), instead of leaving it to a new helper: each start cost ~0.1 s
(Python's, before git is run) while a fast writer's loose objects went on piling up, and
~50 ms of CPU (docs/benchmarks.md, "Session 19")."""
LINGER_POLL = 0.05
"""Seconds between two looks at the store while a helper lingers (:func:`due`: two
directory listings)."""
LINGER_LIFE = CONFIG_TTL
"""A helper lingers no longer than this after it started: the thresholds it was given are
as old as a writer's may be, and a new helper reads them again."""
REPACK_ARGS = ("repack", "-d", "-l", "-q")
"""Loose objects into one new pack (what ``git gc --auto`` runs for them): the objects
reachable from refs, found by a walk that names them, so trees get good deltas."""
DELTA_WINDOW = 4
"""Delta candidates an object in that repack when git's config sets no ``pack.window``
(git: 10). At 100k memories the delta search over large shard trees is most of a repack's
CPU, and four find nearly the same deltas (the new pack 0.3% larger for 20% less CPU,
docs/benchmarks.md). The all-into-one repack keeps git's window."""
LOOSE_THREADS = 1
"""Threads of that repack when git's config sets no ``pack.threads`` (git: one a processor).
Its few thousand objects gain nothing from a second thread, and git's threads each get a
malloc arena of their own, whose freed memory glibc hands back (``madvise``) while the
other thread runs: every such return interrupts the other processors to flush their TLBs,
the writers' too. At 1k memories a loose repack took 145 ms of CPU with git's threads, 129
with one, 83 with one and :data:`MALLOC_TUNABLES`, the same pack (docs/benchmarks.md,
"Session 16")."""
MALLOC_TUNABLES = "glibc.malloc.mmap_threshold=4194304:glibc.malloc.trim_threshold=268435456"
"""``GLIBC_TUNABLES`` for that repack, unless the environment sets its own: zlib sets up a
256 KiB state for every object git inflates or deflates, which glibc's defaults map and
unmap (or trim) each time, a page fault for every page it touches; allocations below 4 MiB
from the heap, kept until the process ends (a repack lives for a second), cost none of that.
Other C libraries ignore the variable."""
BOUNDED_FROM = 8 << 20
"""Packs of at least this many bytes: the loose objects' repack walks only what the refs
reach beyond the commits they pointed at when the helper last packed (recorded in
``autopack.tips``: everything those reach is in a pack), instead of the whole history as
``git repack -d -l`` does. One loose repack of 500 creates' objects took 3.07 s of CPU at 1M
memories and 0.47 s bounded, 0.53 and 0.40 s at 100k, the same at 10k (~5 MB of packs), and
9 ms more at 1k, where two more git processes cost more than the walk they save
(docs/benchmarks.md, "Session 16")."""
BOUNDED_ARGS = (
    "pack-objects",
    "--revs",
    "--reflog",
    "--indexed-objects",
    "--sparse",
    "--unpacked",
    "--incremental",
    "--local",
    "--honor-pack-keep",
    "--keep-true-parents",
    "--non-empty",
    "-q",
)
"""What ``git repack -d -l`` runs (``--all`` aside), reading from its input the commits to
pack and, after ``--not``, those whose objects are packed already; then ``git prune-packed``
and ``git update-server-info``, as ``git repack`` does in-process."""
_TIP = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")
_PACK_NAME = re.compile(r"pack-(?:[0-9a-f]{40}|[0-9a-f]{64})\.pack")
ROLL_FACTOR = 2
"""In a store past :data:`BOUNDED_FROM`, too many packs roll up only the smallest few
(:func:`roll_selection`): at least two, never the largest, and as many more as it takes to
leave every pack above them at least this many times the bytes rolled. ``git pack-objects
--stdin-packs`` reads only the packs named (no walk of the whole history, which ``git
repack -a`` takes whatever it rolls: 4.1 s of its 6.9 s of CPU at 100k memories), and
over a store's life each byte is copied fewer times: simulated with a pack of 1.2 MB
added per loose repack, ~1.9x the store's bytes copied by 100k memories and ~3.8x by 1M,
against ~2.8x and ~23x for all but the largest (``python -m bench.rollup --simulate``; on a
100k store, one roll-up took 1.9 s of CPU against ``git repack -a``'s 7.4: docs/benchmarks.md,
"Session 17")."""
ROLL_CAP_SHARE = 3
"""...and, past the first two, no more than a third of the packs' bytes in all
(:func:`roll_cap`). Uncapped, a 100k store's roll-ups reached ~45 MB (4-8 s of git's time,
while the helper packs no loose objects: up to 32,000 piled up, and a sample taken while the
copy is written beside the packs saw 3.04x the raw text). Capped, the largest roll-up about
halves (at 100k 2.5-2.9 s against 3.6-4.4), roll-ups come more often, each smaller, and over
a store's life about as many bytes are copied (``python -m bench.rollup --simulate``, a pack
of 0.6 MB a loose repack: 2.31x -> 2.20x the store by 100 MB, 3.41x -> 3.55x by 400 MB,
4.76x -> 4.48x by 1,000 MB; docs/benchmarks.md, "Session 19"). A roll-up's copy lives beside
the packs it rolls until it is done, so the cap is what it adds to the store on disk: a
floor of 16 MiB under it (session 19) let a store of 10-25 MB of packs copy two thirds of
itself at once, and a watcher of the 100k scenario saw 2.94-2.96x the raw text then (3.29x
on a disk); without it, 2.60-2.69x (docs/benchmarks.md, "Session 21"), the bytes copied over
a store's life as before."""
ROLL_ARGS = ("pack-objects", "--stdin-packs", "--delta-base-offset", "--non-empty", "-q")
"""That roll-up: the packs named on its input, minus the objects of those named after a
``^`` (all the others); with the loose repack's window and threads (:func:`_roll_small`)."""
SPAN_ARGS = (
    "pack-objects",
    "--revs",
    "--sparse",
    "--delta-base-offset",
    "--local",
    "--honor-pack-keep",
    "--non-empty",
    "-q",
)
"""The roll-up of packs that hold a span of history, one after another (:func:`span_run`):
``git pack-objects`` given the refs' commits at the span's end and, after ``--not``, those
at its start, so it walks only the trees the span changed (``--sparse``) and gives every
object its path, for deltas between the packs; every other pack named with ``--keep-pack``,
so an object in one of them is not copied again (a span that reaches further back than its
packs, say a record written by hand, costs a longer walk, never a second copy of the store).
``--stdin-packs`` walks the whole tree of the
packs' first commit to find those paths: at 100k memories 0.8 s of CPU however little it
rolls, against 0.2 s for a span of three packs, the same objects in a pack 0.06% larger
(docs/benchmarks.md, "Session 18"). Objects the packs hold outside the span (reachable from
a reflog, say) are not in its pack: the rolled packs are deleted only when their indexes
say every object is (:func:`_covers`); otherwise the ``--stdin-packs`` roll-up follows."""
MAX_SPANS = 1000
"""Lines of ``autopack.spans`` read at most (one a pack the helper made; ~10 are usual)."""
_SPANS_LOCK = threading.Lock()
"""Held while the record of spans is read, changed and written (:func:`_update_spans`)."""
IDX_HEADER = b"\xfftOc\x00\x00\x00\x02"
"""A version 2 pack index's first bytes (what git writes)."""
UNROLLED_MARKS = (".mtimes", ".promisor")
"""Files beside a pack that keep it out of a roll-up (:func:`rollable_packs`)."""
PACK_EXTENSIONS = (".idx", ".pack", ".rev", ".bitmap")
"""A rolled-up pack's files, deleted in this order: without its ``.idx`` no reader lists
the pack any more (git's own ``unlink_pack_path`` now deletes the ``.idx`` first too). A
``.keep`` is never there: such packs are never rolled."""
REPACK_ALL_ARGS = ("repack", "-a", "-d", "-l", "-q", "-k")
"""Everything into one pack, for too many packs (``gc --auto`` does the same with ``-A``),
but the largest pack, which stays as it is (``--keep-pack``, :func:`largest_pack`): the
new pack is written before the old ones go, so rolling the largest in too meant two
copies of nearly the whole store on disk for the seconds it took (3.84x the raw text at
100k memories, docs/benchmarks.md "Session 14"). The rest rolled up is soon the larger,
and is kept the next time while the old largest is rolled in.
``-k`` keeps unreachable objects, packed: an object a concurrent writer has written but
not yet made reachable (its branch update is still to come) is never dropped, and
objects of lost compare-and-swap races stop counting as loose. ``gitmem gc`` (``git
gc``) is what drops them, after git's two-week grace period."""


@dataclass(frozen=True)
class Thresholds:
    auto: int
    """``gc.auto``: estimated loose objects that make packing due; <= 0 turns it all off."""
    pack_limit: int
    """``gc.autoPackLimit``: packs that make packing due; <= 0 turns that rule off."""
    floor: int = 0
    """Above 0 (git's config sets no ``gc.auto``): the count starts here and grows with the
    packs up to ``auto`` (:meth:`loose_limit`). 0: ``auto`` as it stands, as git uses it."""
    window: int = 0
    """Above 0 (git's config sets no ``pack.window``): the loose objects' repack searches
    this many delta candidates (:data:`DELTA_WINDOW`). 0: git's own setting."""
    threads: int = 0
    """Above 0 (git's config sets no ``pack.threads``): the loose objects' repack runs this
    many threads (:data:`LOOSE_THREADS`). 0: git's own setting."""

    @property
    def enabled(self) -> bool:
        return self.auto > 0

    def halved(self) -> Thresholds:
        """The same, the loose objects' count halved (:meth:`loose_limit`): the helper's
        while a roll-up of its runs beside its loose repacks (:class:`_Roller`)."""
        return dataclasses.replace(self, auto=max(1, self.auto // 2), floor=self.floor // 2)

    def loose_limit(self, packed: int) -> int:
        """Loose objects that make packing due in a store whose packs hold ``packed`` bytes."""
        if self.floor <= 0:
            return self.auto
        return max(self.floor, min(self.auto, packed // BYTES_PER_LOOSE))


def read_thresholds(config: Any) -> Thresholds:
    """The thresholds git would use, from a pygit2 ``Config`` (system, global and repository
    files, the repository's winning); with no ``gc.auto`` set, gitmem's growing count."""
    pack_limit = _config_int(config, "gc.autoPackLimit")
    if pack_limit is None:
        pack_limit = DEFAULT_PACK_LIMIT
    window = DELTA_WINDOW if _config_int(config, "pack.window") is None else 0
    threads = LOOSE_THREADS if _config_int(config, "pack.threads") is None else 0
    auto = _config_int(config, "gc.auto")
    if auto is None:
        return Thresholds(GROWN_AUTO, pack_limit, DEFAULT_AUTO, window, threads)
    return Thresholds(auto, pack_limit, 0, window, threads)


def _config_int(config: Any, key: str) -> int | None:
    """The integer ``key`` (git's ``k``/``m``/``g`` suffixes), None when unset or not one."""
    try:
        return int(config.get_int(key))
    except (KeyError, ValueError, TypeError):
        return None
    except Exception:  # pygit2.GitError for a value git itself would reject
        log.warning("ignoring %s in git config: not an integer", key)
        return None


def loose_sample_bytes(objects: Path) -> tuple[int, int]:
    """(loose objects, their bytes) in ``objects/17``: 1/256 of the store's, as git samples."""
    sample = objects / SAMPLE_DIR
    try:
        names = os.listdir(sample)  # noqa: PTH208 (names only: after writes that changed it)
    except (FileNotFoundError, NotADirectoryError):
        return 0, 0
    count = size = 0
    for name in names:
        if len(name) == 38:
            with contextlib.suppress(OSError):  # packed and pruned meanwhile
                size += os.stat(os.path.join(sample, name)).st_size  # noqa: PTH116, PTH118
                count += 1
    return count, size


def loose_count(objects: Path, dirs: Sequence[str]) -> int:
    """The loose objects in the fan-out directories ``dirs`` (names only, no ``stat``)."""
    count = 0
    for name in dirs:
        with contextlib.suppress(FileNotFoundError, NotADirectoryError):
            count += sum(len(entry) == 38 for entry in os.listdir(objects / name))  # noqa: PTH208
    return count


def pack_bytes(objects: Path) -> int:
    """The bytes of the store's packs."""
    total = 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(objects / "pack"):
            if entry.name.endswith(".pack"):
                with contextlib.suppress(OSError):
                    total += entry.stat().st_size
    return total


def loose_outweighs_packs(count: int, size: int, packed: int) -> bool:
    """gitmem's own rule beside git's: the loose objects (estimated from the sample) take more
    room than :data:`LOOSE_SHARE` of the packs. A create's loose objects are mostly trees
    (the 256-entry ``memories/`` tree is ~7 KB loose and a few hundred bytes as a delta in a
    pack), so by count alone a small store sat at 9x its raw size before its first pack."""
    if count < MIN_LOOSE_SAMPLE:
        return False
    return 256 * size > max(MIN_LOOSE_BYTES, LOOSE_SHARE * packed)


def _counted(names: set[str]) -> list[str]:
    """The packs among a pack directory's ``names`` that git counts: those with an ``.idx``
    (git finds packs by them: a ``.pack`` without one is still being written, or garbage)
    and without a ``.keep``."""
    return [
        name
        for name in names
        if name.endswith(".pack")
        and name[:-5] + ".idx" in names
        and name[:-5] + ".keep" not in names
    ]


def pack_count(objects: Path) -> int:
    """Packs git would count for ``gc.autoPackLimit`` (:func:`_counted`)."""
    try:
        names = set(os.listdir(objects / "pack"))  # noqa: PTH208 (names only: after every write)
    except FileNotFoundError:
        return 0
    return len(_counted(names))


def packs_by_size(objects: Path) -> list[tuple[int, str]]:
    """(bytes, file name) of the packs :func:`pack_count` counts, smallest first (a roll-up
    takes from fewer: :func:`rollable_packs`)."""
    packs: list[tuple[int, str]] = []
    with contextlib.suppress(FileNotFoundError):
        names = set(os.listdir(objects / "pack"))  # noqa: PTH208 (names and sizes only)
        for name in _counted(names):
            with contextlib.suppress(OSError):
                packs.append((os.stat(objects / "pack" / name).st_size, name))  # noqa: PTH116
    return sorted(packs)


def largest_pack(objects: Path) -> str | None:
    """The file name of the largest pack :func:`packs_by_size` lists; None unless there are
    two."""
    packs = packs_by_size(objects)
    return packs[-1][1] if len(packs) > 1 else None


def rollable_packs(objects: Path) -> list[tuple[int, str]]:
    """:func:`packs_by_size` but for packs git itself treats apart, which a roll-up neither
    takes nor names: a cruft pack (``.mtimes``: unreachable objects with the times git
    expires them by) and a promisor pack (``.promisor``: what a partial clone was given);
    and but for names git does not make (``pack-<id>.pack``), which go to git one a line."""
    pack_dir = objects / "pack"
    return [
        (size, name)
        for size, name in packs_by_size(objects)
        if _PACK_NAME.fullmatch(name)
        and not any((pack_dir / (name[:-5] + mark)).exists() for mark in UNROLLED_MARKS)
    ]


def roll_cap(packs: list[tuple[int, str]]) -> int:
    """The bytes a roll-up takes at most past its first two packs (:data:`ROLL_CAP_SHARE`)."""
    return sum(size for size, _ in packs) // ROLL_CAP_SHARE


def roll_selection(packs: list[tuple[int, str]], cap: float | None = None) -> list[str]:
    """The packs to roll into one, from :func:`rollable_packs`' list: the two smallest, and
    each next one while it holds less than :data:`ROLL_FACTOR` times the bytes taken so far
    (so every pack left above the new one is at least that much larger than it) and all
    taken stay within ``cap`` bytes (:func:`roll_cap`; None: no cap); never the largest.
    Empty when there are not three packs to choose from."""
    candidates = packs[:-1]
    if len(candidates) < 2:
        return []
    taken = candidates[0][0] + candidates[1][0]
    count = 2
    while count < len(candidates) and candidates[count][0] < ROLL_FACTOR * taken:
        if cap is not None and taken + candidates[count][0] > cap:
            break
        taken += candidates[count][0]
        count += 1
    return [name for _, name in candidates[:count]]


Span = tuple[tuple[str, ...], tuple[str, ...]]
"""The refs' commits at the start of a span of history and at its end (sorted ids)."""


def span_run(rolled: list[str], spans: dict[str, Span]) -> tuple[list[str], Span] | None:
    """The longest run, among the packs ``rolled``, of packs the helper made of a span of
    history (``spans``, by pack name) one after another, each starting where the one before
    ends: their names, oldest first, and the whole span (the first start, the last end).
    None unless two or more packs make one. Of two spans from one start (a fork: never
    written by the helper) the first pack by name is followed; spans that come back to
    where they started make no run."""
    following: dict[tuple[str, ...], tuple[str, Span]] = {}
    for name in sorted(rolled):
        span = spans.get(name)
        if span is not None and span[0] != span[1]:
            following.setdefault(span[0], (name, span))
    ends = {span[1] for _, span in following.values()}
    best: list[tuple[str, Span]] = []
    for start in following:
        if start in ends:
            continue  # not the first of a run
        run: list[tuple[str, Span]] = []
        at = start
        while at in following and len(run) < len(following):
            run.append(following[at])
            at = following[at][1][1]
        if len(run) > len(best):
            best = run
    if len(best) < 2:
        return None
    return [name for name, _ in best], (best[0][1][0], best[-1][1][1])


def due(gitdir: Path, limits: Thresholds, *, wide: bool = False) -> str | None:
    """Why packing is due (for the log), or None. The rules of ``git gc --auto``; with
    ``wide`` (the helper), the loose objects counted in :data:`WIDE_SAMPLE` as well, due
    when either count says so (a writer started the helper on git's own)."""
    if not limits.enabled:
        return None
    objects = gitdir / "objects"
    sample, size = loose_sample_bytes(objects)
    packed = pack_bytes(objects)
    count = limits.loose_limit(packed)
    if sample > -(-count // 256):  # git: DIV_ROUND_UP(gc.auto, 256)
        return f"about {256 * sample} loose objects (gc.auto {count})"
    if wide:
        counted = loose_count(objects, WIDE_SAMPLE)
        if counted * 256 > count * len(WIDE_SAMPLE):
            return f"about {counted * 256 // len(WIDE_SAMPLE)} loose objects (gc.auto {count})"
    if loose_outweighs_packs(sample, size, packed):
        return f"about {256 * size // 1024} KiB of loose objects beside {packed // 1024} KiB packed"
    if limits.pack_limit > 0:
        count = pack_count(objects)
        if count > limits.pack_limit:
            return f"{count} {PACKS_REASON} {limits.pack_limit})"
    return None


class AutoPacker:
    """Per writer (one per GitDB): decides after a write whether to start the helper."""

    def __init__(self, gitdir: Path) -> None:
        self.gitdir = gitdir
        self._limits: Thresholds | None = None
        self._read_at = 0.0
        self.launched = 0
        """Helpers this writer started (for tests and benchmarks)."""
        self.last_launch = 0.0
        self._helper: subprocess.Popen[bytes] | None = None
        """The helper this writer started last: until it has exited, starting another only
        queues behind its lock (a fixed pause instead held packing back to one helper every
        five seconds: 1,000 creates' worth of loose objects on an idle machine)."""
        self.enabled = True
        """False: this writer never starts packing (git's config is the user's switch)."""
        self._packs: tuple[int, int, int] = (-1, 0, 0)  # (mtime_ns of objects/pack, packs, bytes)
        self._sample: tuple[int, int, int] = (-1, 0, 0)  # (mtime_ns of objects/17, loose, bytes)
        self._sample_dir = os.fspath(gitdir / "objects" / SAMPLE_DIR)
        self._pack_dir = os.fspath(gitdir / "objects" / "pack")

    def _due(self, limits: Thresholds) -> bool:
        """:func:`due` for the write path: a ``stat`` of ``objects/17`` (and of the pack
        directory), listing either only when it changed since the last write."""
        try:
            mtime = os.stat(self._sample_dir).st_mtime_ns  # noqa: PTH116 (a str: no Path per write)
        except (FileNotFoundError, NotADirectoryError):
            mtime = 0
        objects = self.gitdir / "objects"
        if mtime != self._sample[0]:
            self._sample = (mtime, *(loose_sample_bytes(objects) if mtime else (0, 0)))
        # The packs change only when something packed: listed again only then.
        try:
            mtime = os.stat(self._pack_dir).st_mtime_ns  # noqa: PTH116
        except FileNotFoundError:
            mtime = 0
        if mtime != self._packs[0]:
            self._packs = (mtime, pack_count(objects), pack_bytes(objects)) if mtime else (0, 0, 0)
        if self._sample[1] > -(-limits.loose_limit(self._packs[2]) // 256):
            return True
        if loose_outweighs_packs(self._sample[1], self._sample[2], self._packs[2]):
            return True
        return limits.pack_limit > 0 and self._packs[1] > limits.pack_limit

    def limits(self, repo: Any) -> Thresholds:
        now = time.monotonic()
        if self._limits is None or now - self._read_at > CONFIG_TTL:
            self._limits = read_thresholds(repo.config)
            self._read_at = now
        return self._limits

    def after_write(self, repo: Any) -> bool:
        """Start the packing helper if packing is due and none runs; True if started.

        ``repo`` is the writer's pygit2 ``Repository``, whose config is read at most
        every :data:`CONFIG_TTL` seconds. Never raises: packing is housekeeping, and the
        write it follows has landed.
        """
        if not self.enabled:
            return False
        try:
            limits = self.limits(repo)
            if not limits.enabled or not self._due(limits):
                return False
            if self._helper is not None and self._helper.poll() is None:
                return False  # the helper this writer started is starting up or at work
            if _recently_tried(self.gitdir):
                return False
            helper = launch(self.gitdir, limits)
            if helper is None:
                return False  # another helper holds the lock
            self.last_launch = time.time()
            self._helper = helper
            self.launched += 1
            return True
        except Exception as exc:  # never fail a landed write over housekeeping
            log.debug("automatic packing not started: %s", exc)
            return False


def wait_idle(gitdir: Path, since: float, timeout: float = 60.0) -> bool:
    """Wait until a helper started at ``since`` (``time.time()``) has finished; False if it
    did not within ``timeout``. For tests and benchmarks: writers never wait."""
    deadline = time.monotonic() + timeout
    last = _state(gitdir) / LAST_NAME
    while time.monotonic() < deadline:
        try:
            finished = last.stat().st_mtime >= since - 0.01
        except FileNotFoundError:
            finished = False
        if finished and not _busy(gitdir):
            return True
        time.sleep(0.02)
    return False


@contextlib.contextmanager
def exclusive(gitdir: Path, timeout: float = 600.0) -> Iterator[None]:
    """Hold the packing lock for other maintenance (``gitmem gc``, tests' ``git fsck``):
    waits for a running helper to finish, and no helper starts while it is held.

    Raises :class:`TimeoutError` if a helper still holds it after ``timeout`` seconds.
    """
    state = _state(gitdir)
    try:
        state.mkdir(exist_ok=True)
        fd = os.open(state / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    except OSError:
        # A store this user cannot write (read-only, another's): nothing of ours packs
        # it either, and reading (fsck) must still work.
        yield
        return
    try:
        deadline = time.monotonic() + timeout
        while not try_flock(fd):
            if time.monotonic() > deadline:
                raise TimeoutError(f"automatic packing of {gitdir} still running")
            time.sleep(0.05)
        yield  # closing the descriptor releases the lock
    finally:
        os.close(fd)


def _state(gitdir: Path) -> Path:
    return paths.state_dir(gitdir)


def _busy(gitdir: Path) -> bool:
    """Whether a helper holds the lock (a hint: the helper takes it for real)."""
    try:
        fd = os.open(_state(gitdir) / LOCK_NAME, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        return not try_flock(fd)
    finally:
        os.close(fd)  # releases the probe's lock too


def _recently_tried(gitdir: Path) -> bool:
    """A helper finished a moment ago (or failed within a minute): do not start another."""
    last = _state(gitdir) / LAST_NAME
    try:
        st = last.stat()
        failed = last.read_bytes().startswith(b"failed")
    except FileNotFoundError:
        return False
    wait = RETRY_AFTER_FAILURE if failed else RETRY_AFTER_SUCCESS
    return time.time() - st.st_mtime < wait


def launch(gitdir: Path, limits: Thresholds | None = None) -> subprocess.Popen[bytes] | None:
    """Start the helper detached (its own session, no terminal, no pipes to the writer),
    holding the packing lock already; None, starting nothing, when another holds it.

    The writer takes the lock and hands it to the helper (an inherited descriptor: an
    ``flock`` belongs to the open file, so it stays held when the writer closes its copy).
    Checked and taken in one step, so writers that find packing due at the same moment
    start one helper between them: while a helper took the lock itself, each of them saw
    it free during the ~0.1 s the helper spent starting up, and eight writers started 3-4
    helpers for every repack, each paying Python's and pygit2's start-up for nothing
    (docs/benchmarks.md, "Session 13: automatic packing's own cost"). ``limits`` (the
    writer's :class:`Thresholds`) travel on the command line, so the helper need not load
    pygit2 to read git's config; without them it reads the config itself.
    """
    state = _state(gitdir)
    state.mkdir(exist_ok=True)
    fd = os.open(state / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if not try_flock(fd):
            return None
        package_root = str(Path(__file__).resolve().parents[2])
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (package_root, env.get("PYTHONPATH", "")) if p
        )
        argv = [str(gitdir), "--lock-fd", str(fd)]
        if limits is not None:
            argv += ["--auto", str(limits.auto), "--pack-limit", str(limits.pack_limit)]
            if limits.floor > 0:
                argv += ["--auto-floor", str(limits.floor)]
            if limits.window > 0:
                argv += ["--window", str(limits.window)]
            if limits.threads > 0:
                argv += ["--threads", str(limits.threads)]
        argv += ["--linger-ms", str(round(1000 * LINGER))]
        return subprocess.Popen(
            # -P: the writer's current directory (often a store's work tree, which others
            # write) is not on sys.path; a planted gitmem/ there would run otherwise.
            [sys.executable, "-P", "-m", "gitmem.git.autopack", *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
            pass_fds=(fd,),
            env=env,
        )
    finally:
        # The helper holds its own copy (or, when it could not start, the lock goes here).
        os.close(fd)


def _read_tips(state: Path) -> list[str] | None:
    """The commits recorded by the last packing (None: no record, or not one gitmem wrote:
    then nothing is taken from it)."""
    try:
        lines = (state / TIPS_NAME).read_text(encoding="ascii").split()
    except (OSError, UnicodeDecodeError):
        return None
    if not lines or len(lines) > 100_000 or not all(_TIP.fullmatch(line) for line in lines):
        return None
    return lines


def _read_spans(state: Path) -> dict[str, Span]:
    """The packs the helper made of a span of history (``autopack.spans``: a line a pack,
    ``pack-<id>.pack <start ids> <end ids>``, ids comma-separated). A line that is not that
    is left out; a file that is not text is no record at all."""
    try:
        lines = (state / SPANS_NAME).read_text(encoding="ascii").splitlines()
    except (OSError, UnicodeDecodeError):
        return {}
    spans: dict[str, Span] = {}
    for line in lines[:MAX_SPANS]:
        fields = line.split(" ")
        if len(fields) != 3 or not _PACK_NAME.fullmatch(fields[0]):
            continue
        since, tips = (tuple(field.split(",")) for field in fields[1:])
        if all(_TIP.fullmatch(tip) for tip in (*since, *tips)) and len(since) + len(tips) <= 200:
            spans[fields[0]] = (since, tips)
    return spans


def _update_spans(
    state: Path, pack_dir: Path, drop: Sequence[str] = (), add: dict[str, Span] | None = None
) -> None:
    """The record of spans read, the packs ``drop`` taken out and ``add`` put in, and written
    again, under :data:`_SPANS_LOCK`: a roll-up under way (:class:`_Roller`) and the loose
    repacks beside it each change their own packs' lines, and neither may write back a record
    read before the other's change."""
    with _SPANS_LOCK:
        spans = _read_spans(state)
        for name in drop:
            spans.pop(name, None)
        spans.update(add or {})
        _write_spans(state, spans, pack_dir)


def _write_spans(state: Path, spans: dict[str, Span], pack_dir: Path) -> None:
    """``spans`` written whole, but for packs that are gone (their ``.idx`` first)."""
    text = "".join(
        f"{name} {','.join(since)} {','.join(tips)}\n"
        for name, (since, tips) in sorted(spans.items())
        if (pack_dir / (name[:-5] + ".idx")).exists()
    )
    _write_state(state, SPANS_NAME, text)


def _pack_ids(idx: Path, size: int) -> tuple[mmap.mmap, list[int]]:
    """A version 2 pack index mapped, and where each of its 256 fan-out buckets of object
    ids (``size`` bytes each, sorted) starts, the last entry where they end. ValueError when
    it is not such an index."""
    with idx.open("rb") as file:
        data = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
    table = 8 + 256 * 4
    if len(data) < table or data[:8] != IDX_HEADER:
        data.close()
        raise ValueError(f"{idx.name} is not a version 2 pack index")
    fanout = [int.from_bytes(data[8 + 4 * i : 12 + 4 * i], "big") for i in range(256)]
    count = fanout[-1]
    if fanout != sorted(fanout) or (
        len(data) < table + count * (size + 8) + 2 * size
    ):
        data.close()
        raise ValueError(f"{idx.name} does not hold the objects it counts")
    return data, [table + size * n for n in (0, *fanout)]


def _covers(pack_dir: Path, made: str, rolled: list[str]) -> bool:
    """Whether the pack ``pack-<made>`` holds every object the packs ``rolled`` hold, read
    from their indexes a fan-out bucket at a time (a roll-up of millions of objects never
    holds all their ids at once). False when an index cannot be read as one."""
    size = len(made) // 2
    maps: list[tuple[mmap.mmap, list[int]]] = []
    try:
        new = _pack_ids(pack_dir / f"pack-{made}.idx", size)
        maps.append(new)
        for name in rolled:
            if len(name) - len("pack-.pack") != len(made):
                return False
            maps.append(_pack_ids(pack_dir / (name[:-5] + ".idx"), size))
        held, where = new
        for bucket in range(256):
            first, end = where[bucket], where[bucket + 1]
            have = {held[i : i + size] for i in range(first, end, size)}
            for data, starts in maps[1:]:
                first, end = starts[bucket], starts[bucket + 1]
                if not {data[i : i + size] for i in range(first, end, size)} <= have:
                    return False
        return True
    except (OSError, ValueError) as exc:
        log.info("could not read the indexes of a roll-up: %s", exc)
        return False
    finally:
        for data, _ in maps:
            data.close()


def _ref_tips(gitdir: Path) -> list[str]:
    """The objects the store's refs point at (commits, and tags'), read by git; none when
    git cannot say (the loose repack then walks everything, as git's own does)."""
    from gitmem.git.command import run_git

    try:
        result = run_git(["for-each-ref", "--format=%(objectname)"], gitdir=gitdir, timeout=600)
    except StoreError as exc:
        log.info("reading the refs of %s failed (%s)", gitdir, exc)
        return []
    found = result.stdout.decode("ascii", "replace").split()
    return sorted({line for line in found if _TIP.fullmatch(line)})


def _revisions(tips: Sequence[str], packed: Sequence[str]) -> str:
    """``git pack-objects --revs``' input: what ``tips`` reach beyond what ``packed`` reach
    (ids only, one a line, as :func:`_read_tips` and :func:`_read_spans` checked them)."""
    return "".join(f"{tip}\n" for tip in tips) + "--not\n" + "".join(f"{t}\n" for t in packed)


def _pack_new(
    gitdir: Path, tips: list[str], packed: list[str], limits: Thresholds
) -> str | None:
    """The loose objects ``tips`` reach beyond what ``packed`` reaches into a new pack, the
    loose copies of packed objects deleted: ``git repack -d -l`` without its walk of the
    whole history. Returns the new pack's id (None: nothing was loose). Raises
    :class:`StoreError` when git refuses (a recorded commit gone since, say): the caller
    repacks the usual way."""
    from gitmem.git.command import run_git

    args = [*BOUNDED_ARGS, *_pack_options(limits), str(gitdir / "objects" / "pack" / "pack")]
    revisions = _revisions(tips, packed)
    env = _repack_env()
    result = run_git(
        args, gitdir=gitdir, input=revisions.encode("ascii"), timeout=3600, extra_env=env
    )
    run_git(["prune-packed", "-q"], gitdir=gitdir, timeout=3600, extra_env=env)
    run_git(["update-server-info"], gitdir=gitdir, timeout=600)
    made = result.stdout.decode("ascii", "replace").strip()
    return made if _TIP.fullmatch(made) else None


def _roll_small(gitdir: Path, limits: Thresholds, state: Path) -> bool:
    """The packs :func:`roll_selection` picks rolled into one, then deleted, ``.idx`` first.
    When the helper made every one of them of a span of history (``autopack.spans``) and
    the spans follow one another (:func:`span_run`), by their whole span (:data:`SPAN_ARGS`),
    kept only if its pack holds every object theirs do (:func:`_covers`). Otherwise, and when
    that does not hold, with ``git pack-objects --stdin-packs`` (every object in them,
    reachable or not, as ``repack -k`` keeps them; those also in another pack left there).
    False when there is nothing to pick or git refuses (a git older than 2.32, a pack gone
    meanwhile): the caller rolls up the usual way. Loose objects stay loose, for the loose
    repacks. The loose repack's window, threads and :data:`MALLOC_TUNABLES`
    (:func:`_pack_options`): at 100k memories 1.98 -> 1.60 s of CPU for the same roll-up by
    name, its pack 0.02% larger."""
    from gitmem.git.command import run_git

    pack_dir = gitdir / "objects" / "pack"
    # Only these are named after a ^: an object also in a kept, cruft or promisor pack is
    # copied all the same (twice is harmless; only in a cruft pack, it could expire).
    packs = rollable_packs(gitdir / "objects")
    rolled = roll_selection(packs, roll_cap(packs))
    if not rolled:
        return False
    spans = _read_spans(state)
    # By span only when every pack picked is in the run. Rolling the run alone and leaving
    # the others (made before any record, or rolled up by name) for later kept the pack
    # count up: at 100k memories 29-104 roll-ups instead of 15-16, and as much of git's time
    # or more (20-50 s against 23-24; docs/benchmarks.md, "Session 18").
    run = span_run(rolled, spans)
    if run is not None and len(run[0]) == len(rolled):
        if _roll_run(gitdir, limits, state, spans, run, packs):
            return True
        log.info("the span's pack of %s left objects of its packs out: --stdin-packs", gitdir)
        packs = rollable_packs(gitdir / "objects")
        rolled = roll_selection(packs, roll_cap(packs))
        if not rolled:
            return False
    taken = set(rolled)
    listing = "".join(f"{name}\n" for name in rolled) + "".join(
        f"^{name}\n" for _, name in packs if name not in taken
    )
    made = _pack_objects(gitdir, ROLL_ARGS, listing, limits, "the small packs")
    if made is None:
        return False
    _delete_packs(pack_dir, rolled, made, state)
    if any(name in spans for name in rolled):
        _update_spans(state, pack_dir, drop=rolled)  # the spans of packs now gone
    run_git(["update-server-info"], gitdir=gitdir, timeout=600)
    return True


def _roll_run(
    gitdir: Path,
    limits: Thresholds,
    state: Path,
    spans: dict[str, Span],
    run: tuple[list[str], Span],
    packs: list[tuple[int, str]],
) -> bool:
    """The packs of ``run`` (:func:`span_run`) rolled into one by their span, the other
    ``packs`` kept out (:func:`_roll_span`), then deleted once their indexes show every
    object of theirs in it (:func:`_covers`); ``spans`` (the record) updated and written.
    False, deleting nothing, when git refuses or an object is missing: their spans are then
    forgotten, and they roll up by name."""
    from gitmem.git.command import run_git

    pack_dir = gitdir / "objects" / "pack"
    names, span = run
    made = _roll_span(gitdir, span, limits, [name for _, name in packs if name not in names])
    covered = made is not None and _covers(pack_dir, made, names)
    for name in names:
        spans.pop(name, None)  # rolled now, or never again by their spans
    made_span = {f"pack-{made}.pack": span} if covered else {}
    _update_spans(state, pack_dir, drop=names, add=made_span)
    if made is not None and covered:
        _delete_packs(pack_dir, names, made, state)
        run_git(["update-server-info"], gitdir=gitdir, timeout=600)
    return covered


def _roll_span(gitdir: Path, span: Span, limits: Thresholds, others: list[str]) -> str | None:
    """What the refs reach at the end of ``span`` beyond what they reach at its start, but
    for the objects in the packs ``others``, in one new pack (:data:`SPAN_ARGS`); its id,
    None when git made none or refused."""
    since, tips = span
    revisions = _revisions(tips, since)
    command = (*SPAN_ARGS, *(f"--keep-pack={name}" for name in others))
    return _pack_objects(gitdir, command, revisions, limits, "a span")


def _pack_objects(
    gitdir: Path, command: tuple[str, ...], given: str, limits: Thresholds, what: str
) -> str | None:
    """``git pack-objects`` (``command``, with :func:`_pack_options` and
    :data:`MALLOC_TUNABLES`) into the store's pack directory, ``given`` on its input: the
    new pack's id, None when git refused or made none (logged, naming ``what`` it rolled)."""
    from gitmem.git.command import run_git

    pack_dir = gitdir / "objects" / "pack"
    args = [*command, *_pack_options(limits), str(pack_dir / "pack")]
    try:
        result = run_git(
            args, gitdir=gitdir, input=given.encode("ascii"), timeout=3600, extra_env=_repack_env()
        )
    except StoreError as exc:
        log.info("rolling up %s of %s failed (%s)", what, gitdir, exc)
        return None
    made = result.stdout.decode("ascii", "replace").strip()
    if not _TIP.fullmatch(made) or not (pack_dir / f"pack-{made}.idx").exists():
        log.info("rolling up %s of %s made no pack (%r)", what, gitdir, made[:80])
        return None
    return made


def _delete_packs(pack_dir: Path, rolled: list[str], made: str, state: Path) -> None:
    """The packs ``rolled`` deleted, ``.idx`` first, once the pack ``pack-<made>`` holds
    their objects (one of them may be that very pack: the same objects written again).
    Named first in :data:`DELETING_NAME`, so that a ``.pack`` a kill leaves without its
    ``.idx`` (read by nobody, and kept by ``git gc``) is deleted by the next helper
    (:func:`_finish_deleting`)."""
    gone = [name for name in rolled if name != f"pack-{made}.pack"]
    earlier = _deleting(state)  # a young one the last helper left for later: still named
    _name_deleting(state, [*earlier, *gone])
    for name in gone:
        _unlink_pack(pack_dir, name)
    _name_deleting(state, earlier)


def _unlink_pack(pack_dir: Path, name: str) -> None:
    """The files of the pack ``name`` deleted, ``.idx`` first (:data:`PACK_EXTENSIONS`)."""
    for extension in PACK_EXTENSIONS:
        with contextlib.suppress(FileNotFoundError):
            (pack_dir / (name[:-5] + extension)).unlink()


def _deleting(state: Path) -> list[str]:
    """The names in :data:`DELETING_NAME` (none when it is missing or not text)."""
    try:
        return (state / DELETING_NAME).read_text(encoding="ascii").split()[:MAX_SPANS]
    except (OSError, UnicodeDecodeError):
        return []


def _name_deleting(state: Path, names: list[str]) -> None:
    """:data:`DELETING_NAME` written whole with ``names``, or removed when there are none."""
    if names:
        _write_state(state, DELETING_NAME, "".join(f"{name}\n" for name in names))
    else:
        with contextlib.suppress(FileNotFoundError):
            (state / DELETING_NAME).unlink()


def _finish_deleting(gitdir: Path, state: Path) -> None:
    """The deletions a killed helper left half done (:func:`_delete_packs`): each pack it
    named whose ``.idx`` is gone loses the rest, once :data:`ORPHAN_AGE` old (named again
    for the next helper until then). A named pack that still has its ``.idx`` is a pack
    like any other, left alone; names git does not make are never used."""
    names = _deleting(state)
    if not names:
        return
    pack_dir = gitdir / "objects" / "pack"
    later: list[str] = []
    for name in names:
        pack = pack_dir / name
        if not _PACK_NAME.fullmatch(name) or (pack_dir / (name[:-5] + ".idx")).exists():
            continue
        try:
            young = time.time() - pack.stat().st_mtime < ORPHAN_AGE
        except OSError:
            young = False  # gone already: the rest of it goes below
        if young:
            later.append(name)
        else:
            _unlink_pack(pack_dir, name)
    _name_deleting(state, later)


def _pack_options(limits: Thresholds) -> list[str]:
    """The ``--window`` and ``--threads`` of the loose objects' repack and of a big store's
    small-pack roll-up, where gitmem sets them."""
    options = [f"--window={limits.window}"] if limits.window > 0 else []
    return options + ([f"--threads={limits.threads}"] if limits.threads > 0 else [])


def _repack_env() -> dict[str, str]:
    return {} if "GLIBC_TUNABLES" in os.environ else {"GLIBC_TUNABLES": MALLOC_TUNABLES}


def _repack(gitdir: Path, everything: bool, limits: Thresholds) -> None:
    """The one git call (through :mod:`gitmem.git.command`): the loose objects into a new
    pack (with ``limits.window`` delta candidates and ``limits.threads`` threads, when above
    0, and :data:`MALLOC_TUNABLES`), or all but the largest pack into one when there are too
    many packs (all into one for ``gc.autoPackLimit`` 1, which two packs would still
    exceed)."""
    from gitmem.git.command import run_git

    env: dict[str, str] = {}
    if everything:
        args = list(REPACK_ALL_ARGS)
        largest = largest_pack(gitdir / "objects") if limits.pack_limit != 1 else None
        if largest is not None:
            args.append(f"--keep-pack={largest}")
    else:
        args = [*REPACK_ARGS, *_pack_options(limits)]
        env = _repack_env()
    run_git(args, gitdir=gitdir, timeout=3600, extra_env=env)


def run(
    gitdir: Path,
    *,
    lock_fd: int | None = None,
    limits: Thresholds | None = None,
    linger: float = 0.0,
) -> int:
    """The helper: under the lock, repack until nothing is due. Returns repacks run.

    ``lock_fd``: the packing lock, taken by the writer that started this helper
    (:func:`launch`); without it the helper takes the lock itself. ``limits``: the
    thresholds the writer read; without them git's config is read each round. ``linger``:
    seconds to stay once nothing is due, the lock let go, for the next repack due
    (:func:`_next_due`; :data:`LINGER` for the helper a writer starts); the helper then
    takes the lock again, or leaves if another helper holds it.
    """
    state = _state(gitdir)
    state.mkdir(exist_ok=True)
    fd = (
        lock_fd
        if lock_fd is not None
        else os.open(state / LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o600)
    )
    try:
        # Taking it again on the descriptor that holds it succeeds at once.
        if not _hold(fd):
            return 0  # another helper is at work
        _finish_deleting(gitdir, state)
        thresholds = _reader(gitdir) if limits is None else lambda: limits
        rounds = 0
        status = "ok"
        started = time.monotonic()
        config = _config_stamp(gitdir)
        roller: _Roller | None = None
        try:
            previous: str | None = None
            previous_tips: list[str] = []
            burst = 0
            pack_dir = gitdir / "objects" / "pack"
            while True:
                limit = thresholds()
                if roller is not None and not roller.is_alive():
                    if not roller.outcome():  # git refused it: the usual way
                        _repack(gitdir, everything=True, limits=limit)
                    roller = None
                # Beside a roll-up a loose repack takes about twice as long (three busy
                # processes on two processors here), so it starts at half the count.
                looking = limit if roller is None else limit.halved()
                reason = due(gitdir, looking, wide=True) if burst < MAX_ROUNDS else None
                if roller is not None and reason is not None and PACKS_REASON in reason:
                    reason = None  # the roll-up under way is for those packs
                if reason is None:
                    if roller is not None:
                        roller.join(LINGER_POLL)  # loose objects may fall due meanwhile
                        continue
                    # Stay for the next repack only after one ran: a helper that found
                    # nothing due leaves at once, as it always did.
                    if not rounds or not linger:
                        break
                    # Finished, as far as wait_idle and `gitmem gc` can tell: the state
                    # says so and the lock is free while this helper waits.
                    _write_state(state, LAST_NAME, f"{status}\nrepacks {rounds}\n")
                    fcntl.flock(fd, fcntl.LOCK_UN)
                    if not _next_due(gitdir, limit, started, linger, config) or not _hold(fd):
                        break
                    # What piled up while it waited is new writes, not objects a repack
                    # left loose: no all-into-one repack for it.
                    previous, burst = None, 0
                    continue
                log.info("packing %s: %s", gitdir, reason)
                # A big store: the refs' commits now, recorded once packed (read before
                # packing, so what they reach is in the new pack); the loose repack then
                # packs only what is new since the last record.
                big = pack_bytes(gitdir / "objects") >= BOUNDED_FROM
                tips = _ref_tips(gitdir) if big else []
                # Still too many loose objects right after packing the reachable ones: they
                # are unreachable (lost races), which only an all-into-one repack packs.
                # Unless the refs moved meanwhile (known in a big store, which reads them
                # each round): then they are new writes, and a loose repack takes them for
                # a fraction of what rolling every pack up costs there.
                moved = bool(tips) and tips != previous_tips
                again = previous is not None and PACKS_REASON not in previous and not moved
                everything = again or PACKS_REASON in reason
                if everything and roller is not None:
                    roller.join()  # git repack -a deletes the packs it is reading
                    continue
                since = _read_tips(state) if tips and not everything else None
                # Too many packs in a big store: only the smallest few rolled up, in a
                # thread, while this one goes on packing loose objects as they fall due.
                # What the refs reach may still be loose after it: the record stays.
                small = PACKS_REASON in reason and big and limit.pack_limit != 1
                record = tips
                if small:
                    roller = _Roller(gitdir, limit, state)
                    roller.start()
                    record = []
                elif since is not None:
                    try:
                        made = _pack_new(gitdir, tips, since, limit)
                        if made is not None:  # a pack of the span since..tips: rolls up by it
                            span = (tuple(since), tuple(tips))
                            _update_spans(state, pack_dir, add={f"pack-{made}.pack": span})
                    except StoreError as exc:
                        log.info("packing what is new in %s failed (%s): all", gitdir, exc)
                        _repack(gitdir, everything=False, limits=limit)
                else:
                    _repack(gitdir, everything=everything, limits=limit)
                if record:
                    _write_state(state, TIPS_NAME, "".join(f"{tip}\n" for tip in record))
                previous, previous_tips = reason, tips
                rounds += 1
                burst += 1
        except Exception as exc:
            status = f"failed: {exc}"
            raise
        finally:
            if roller is not None:  # the lock is let go below: the roll-up ends first
                roller.join()
                with contextlib.suppress(Exception):
                    roller.outcome()
            _write_state(state, LAST_NAME, f"{status}\nrepacks {rounds}\n")
        return rounds
    finally:
        os.close(fd)


class _Roller(threading.Thread):
    """:func:`_roll_small` in a thread of the helper: a roll-up takes seconds in a big store
    (git's walk and copy), and the loose objects fast writers add meanwhile are packed beside
    it instead of piling up (docs/benchmarks.md, "Session 20"): with a writer at ~600 creates
    a second, a roll-up of 2.5-4 s let 12,000-29,000 loose objects pile up. Meanwhile the
    helper starts loose repacks at half the count (:meth:`Thresholds.halved`) and runs no
    other roll-up and no ``git repack -a`` (which would delete the packs it reads). A loose
    repack's pack holds objects no rolled pack holds (``--unpacked``, written after the
    roll-up's list of packs), and the record of spans is changed line by line under a lock
    (:func:`_update_spans`). Its outcome, or what it raised, is taken up by :meth:`outcome`
    once it is done; the helper lets the packing lock go only after that."""

    def __init__(self, gitdir: Path, limits: Thresholds, state: Path) -> None:
        super().__init__(name="gitmem-autopack-roll-up", daemon=False)
        self._args = (gitdir, limits, state)
        self._rolled = False
        self._error: BaseException | None = None

    def run(self) -> None:
        try:
            self._rolled = _roll_small(*self._args)
        except BaseException as exc:  # raised again in the helper's own thread
            self._error = exc

    def outcome(self) -> bool:
        """Whether it rolled the packs up (False: git refused; roll up the usual way);
        what it raised, raised again."""
        self.join()
        if self._error is not None:
            raise self._error
        return self._rolled


def _write_state(state: Path, name: str, text: str) -> None:
    """``state/name`` replaced whole by ``text`` (a reader sees the old file or the new one);
    a failure leaves the old one, which still holds for both files the helper writes."""
    tmp = state / f"{name}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, state / name)


def _hold(fd: int) -> bool:
    """The packing lock taken on ``fd`` (False: another holds it), this helper's pid written
    in its file for whoever looks."""
    if not try_flock(fd):
        return False
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return True


def _config_stamp(gitdir: Path) -> tuple[int, int] | None:
    """The store's own git config file's change time and size (None: none to read)."""
    try:
        st = (gitdir / "config").stat()
    except OSError:
        return None
    return st.st_mtime_ns, st.st_size


def _next_due(
    gitdir: Path,
    limits: Thresholds,
    started: float,
    linger: float,
    config: tuple[int, int] | None,
) -> bool:
    """Whether packing fell due again within ``linger`` seconds (looked at every
    :data:`LINGER_POLL`), before :data:`LINGER_LIFE` since the helper ``started`` and
    while the store's config file stays as it was: a changed config (``gc.auto`` 0, say)
    is for a new helper, which reads it. A store gone meanwhile is never due."""
    deadline = min(time.monotonic() + linger, started + LINGER_LIFE)
    while time.monotonic() < deadline:
        time.sleep(LINGER_POLL)
        if _config_stamp(gitdir) != config:
            return False
        if due(gitdir, limits, wide=True) is not None:
            return True
    return False


def _reader(gitdir: Path) -> Callable[[], Thresholds]:
    """Git's thresholds for ``gitdir``, read afresh at each call (pygit2, loaded here only)."""
    import pygit2

    repo = pygit2.Repository(str(gitdir), pygit2.enums.RepositoryOpenFlag.NO_SEARCH)
    return lambda: read_thresholds(repo.config)


USAGE = (
    "usage: python -m gitmem.git.autopack <gitdir> [--lock-fd N]"
    " [--auto N --pack-limit N [--auto-floor N] [--window N] [--threads N]] [--linger-ms N]"
)


OPTIONS = (
    "--lock-fd",
    "--auto",
    "--pack-limit",
    "--auto-floor",
    "--window",
    "--threads",
    "--linger-ms",
)


def _parse(argv: list[str]) -> tuple[Path, int | None, Thresholds | None, float]:
    """The helper's command line; ValueError names what is wrong. (Parsed by hand: every
    helper's start-up would carry argparse's import, for a few options.)"""
    if not argv:
        raise ValueError("no git directory given")
    gitdir, rest = Path(argv[0]), argv[1:]
    if len(rest) % 2:
        raise ValueError(f"{rest[-1]} has no value")
    options: dict[str, int] = {}
    for name, value in zip(rest[::2], rest[1::2], strict=True):
        if name not in OPTIONS or name in options:
            raise ValueError(f"unknown or repeated option {name}")
        if not re.fullmatch(r"-?\d{1,9}", value):
            raise ValueError(f"{name} takes a whole number, not {value!r}")
        options[name] = int(value)
    if ("--auto" in options) != ("--pack-limit" in options):
        raise ValueError("--auto and --pack-limit go together")
    for name in ("--auto-floor", "--window", "--threads"):
        if name in options and "--auto" not in options:
            raise ValueError(f"{name} needs --auto and --pack-limit")
    limits = (
        Thresholds(
            options["--auto"],
            options["--pack-limit"],
            options.get("--auto-floor", 0),
            options.get("--window", 0),
            options.get("--threads", 0),
        )
        if "--auto" in options
        else None
    )
    lock_fd = options.get("--lock-fd")
    if lock_fd is not None and lock_fd < 3:
        raise ValueError(f"--lock-fd {lock_fd} is not a descriptor the writer passed")
    linger = options.get("--linger-ms", 0)
    if not 0 <= linger <= 1000 * LINGER_LIFE:
        raise ValueError(f"--linger-ms takes 0 to {1000 * LINGER_LIFE:.0f}, not {linger}")
    return gitdir, lock_fd, limits, linger / 1000


def main(argv: list[str]) -> int:
    try:
        gitdir, lock_fd, limits, linger = _parse(argv)
    except ValueError as exc:
        print(f"gitmem autopack: {exc}\n{USAGE}", file=sys.stderr)
        return 2
    try:
        run(gitdir, lock_fd=lock_fd, limits=limits, linger=linger)
    except Exception as exc:
        print(f"gitmem autopack: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
