"""What a big store's roll-up of too many packs costs: the rule that picks the packs, run
over a store's life, and the roll-up itself on copies of a real store.

``--simulate`` adds one pack of ``--batch-mb`` a loose repack (what the automatic packer's
loose repacks make at 100k memories) until the store holds each of ``--sizes`` MB, and
rolls up whenever there are more packs than ``--limit``, by four rules: all but the
largest into one (the packer before session 17), gitmem's own
(:func:`gitmem.git.autopack.roll_selection`) without the cap on a roll-up's bytes
(sessions 17-18) and with it (:func:`gitmem.git.autopack.roll_cap`, the shipped code), and
git's geometric rule (factor 2, after every loose repack, as ``git repack --geometric=2``
would). It reports the bytes each rule copied over the store's life, in multiples of the
store, the packs it left, and its largest roll-up as a share of the packs beside it (what a
roll-up's copy adds on disk while it runs). Sizes stand in for bytes: a roll-up's pack is
taken to be the sum of what it rolled.

``--store PATH`` measures the roll-up on copies of a bare store holding at least three packs
without a ``.keep`` (under ``TMPDIR``, one fresh copy a run), in turn: ``git repack -a -d
-l -q -k --keep-pack=<largest>`` (the roll-up of session 16, what the packer still runs in
a small store), the small-pack roll-up by name (``gitmem.git.autopack._roll_small`` with the
store's ``autopack.spans`` removed: ``git pack-objects --stdin-packs``, session 17), as the
helper runs it now (by span when the helper made every pack picked, one span after another),
and, where some of them make such a run, that run alone by its span; each with the loose
repack's settings as the helper gives them, and the MB of packs each rolled. CPU is git's, from
``RUSAGE_CHILDREN``; every object the copy held is checked to be there afterwards.
``--build PATH --creates N`` makes such a store: N single creates with packing on, as gitmem
ships (``--from SRC``: into a copy of the store SRC), then four rounds of 800 more, each
packed by a loose repack of the helper's (so there are packs to roll up, the last three at
least recorded with their spans)::

    python -m bench.rollup --simulate
    python -m bench.rollup --build /dev/shm/r100k.git --creates 100000
    python -m bench.rollup --store /dev/shm/r100k.git --rounds 3
    python -m bench.rollup --build /dev/shm/r1m.git --from <a 1M store> --creates 0
"""

from __future__ import annotations

import argparse
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from bench.harness import git
from gitmem.git import autopack

Rule = Callable[[list[float], int], list[float] | None]
"""Pack sizes (smallest first) and the pack limit -> the sizes rolled into one, or None."""


def _all_but_largest(sizes: list[float], limit: int) -> list[float] | None:
    return sizes[:-1] if len(sizes) > limit else None


def _gitmem(sizes: list[float], limit: int, capped: bool = True) -> list[float] | None:
    if len(sizes) <= limit:
        return None
    named = [(size, f"pack-{i:040x}.pack") for i, size in enumerate(sizes)]
    # Sizes are MB here: the cap as autopack.roll_cap computes it in bytes.
    cap = sum(sizes) / autopack.ROLL_CAP_SHARE
    chosen = set(autopack.roll_selection(named, cap if capped else None))  # type: ignore[arg-type]
    return [size for size, name in named if name in chosen] or None


def _uncapped(sizes: list[float], limit: int) -> list[float] | None:
    return _gitmem(sizes, limit, capped=False)


def _geometric(sizes: list[float], limit: int) -> list[float] | None:
    """git's split: every pack above it at least twice all below it (packs by size here,
    where git counts objects), checked after every loose repack whatever the count."""
    below = 0.0
    split = -1
    for i, size in enumerate(sizes):
        if i and size < 2 * below:
            split = i
        below += size
    return sizes[: split + 1] if split > 0 else None


RULES: dict[str, Rule] = {
    "all but the largest (before)": _all_but_largest,
    "gitmem's roll_selection, uncapped (sessions 17-18)": _uncapped,
    "gitmem's roll_selection, capped (now)": _gitmem,
    "git --geometric=2, every round": _geometric,
}


def simulate(
    store_mb: float, batch_mb: float, limit: int, rule: Rule
) -> tuple[float, int, int, float]:
    """(bytes copied / store bytes, roll-ups, most packs at once, the largest roll-up as a
    share of the packs it was made beside) over a store's life. The last is what a roll-up
    adds to the store on disk while it runs (its copy, beside the packs it rolls): counted
    from :data:`~gitmem.git.autopack.BOUNDED_FROM` on, where the packer rolls up small
    packs (below it, ``git repack -a`` copies everything)."""
    packs: list[float] = []
    copied = widest = 0.0
    rollups = most = 0
    bounded = autopack.BOUNDED_FROM / 2**20
    for _ in range(round(store_mb / batch_mb)):
        packs.append(batch_mb)
        packs.sort()
        rolled = rule(packs, limit)
        if rolled:
            if sum(packs) >= bounded:
                widest = max(widest, sum(rolled) / sum(packs))
            for size in rolled:
                packs.remove(size)
            packs.append(sum(rolled))
            packs.sort()
            copied += sum(rolled)
            rollups += 1
        most = max(most, len(packs))
    return copied / sum(packs), rollups, most, widest


def _objects(path: Path) -> set[str]:
    return set(git(path, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)").split())


def _limits(path: Path) -> autopack.Thresholds:
    import pygit2

    return autopack.read_thresholds(pygit2.Repository(str(path)).config)


def _before(path: Path) -> None:
    autopack._repack(path, everything=True, limits=_limits(path))


def _by_name(path: Path) -> None:
    (path / "gitmem" / autopack.SPANS_NAME).unlink(missing_ok=True)
    _now(path)


def _now(path: Path) -> None:
    if not autopack._roll_small(path, _limits(path), path / "gitmem"):
        raise SystemExit(f"{path}: nothing to roll up (fewer than three packs?)")


def _run_alone(path: Path) -> None:
    """The longest run of spans among the packs picked, rolled by its span alone (what the
    helper does when the run is every pack picked; session 18 measured leaving the rest)."""
    packs = autopack.rollable_packs(path / "objects")
    state = path / "gitmem"
    spans = autopack._read_spans(state)
    run = autopack.span_run(autopack.roll_selection(packs, autopack.roll_cap(packs)), spans)
    if run is None or not autopack._roll_run(path, _limits(path), state, spans, run, packs):
        raise SystemExit(f"{path}: no run of spans among the packs picked, or it did not hold")


def measure(store: Path, rounds: int) -> None:
    ways: dict[str, Callable[[Path], None]] = {
        "git repack -a (session 16)": _before,
        "small packs by name, --stdin-packs (session 17)": _by_name,
        "small packs as the helper rolls them now": _now,
    }
    packs = autopack.rollable_packs(store / "objects")
    picked = autopack.roll_selection(packs, autopack.roll_cap(packs))
    run = autopack.span_run(picked, autopack._read_spans(store / "gitmem"))
    if run is not None:
        ways["the run of spans among them alone"] = _run_alone
    whole = run is not None and len(run[0]) == len(picked)
    print(
        f"{store}: {len(picked)} packs picked, {len(run[0]) if run else 0} of them a run of "
        f"spans: the helper rolls them {'by their span' if whole else 'by name'}"
    )
    cpu: dict[str, list[float]] = {name: [] for name in ways}
    wall: dict[str, list[float]] = {name: [] for name in ways}
    size: dict[str, int] = {}
    rolled: dict[str, int] = {}
    packed = autopack.pack_bytes(store / "objects")
    print(f"{store}: {len(autopack.packs_by_size(store / 'objects'))} packs, {packed / 1e6:.1f} MB")
    for r in range(rounds):
        for name in list(ways) if r % 2 == 0 else list(ways)[::-1]:
            with tempfile.TemporaryDirectory(prefix="gitmem-rollup-") as tmp:
                copy = Path(tmp) / "store.git"
                shutil.copytree(store, copy)
                objects = _objects(copy)
                before = resource.getrusage(resource.RUSAGE_CHILDREN)
                started = time.perf_counter()
                ways[name](copy)
                wall[name].append(time.perf_counter() - started)
                after = resource.getrusage(resource.RUSAGE_CHILDREN)
                cpu[name].append(
                    after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime
                )
                missing = objects - _objects(copy)
                if missing:
                    raise SystemExit(f"{name}: {len(missing)} objects gone")
                size[name] = autopack.pack_bytes(copy / "objects")
                rolled[name] = packed - sum(
                    kept for kept, pack in autopack.packs_by_size(copy / "objects")
                    if (store / "objects" / "pack" / pack).exists()
                )
                print(f"  {name}: {cpu[name][-1] * 1e3:,.0f} ms of CPU", flush=True)
    first = next(iter(ways))
    for name in ways:
        ratio = statistics.median(cpu[first]) / statistics.median(cpu[name])
        print(
            f"{name}: CPU median {statistics.median(cpu[name]) * 1e3:,.0f} ms ({ratio:.2f}x "
            f"less than the first), wall {statistics.median(wall[name]) * 1e3:,.0f} ms, "
            f"{rolled[name] / 1e6:.2f} MB of packs rolled, packs after {size[name] / 1e6:.2f} MB"
        )


def build(path: Path, creates: int, source: Path | None = None) -> None:
    import gitmem
    from bench.fixtures import fields_for

    if source is not None:
        shutil.copytree(source, path)
        store = gitmem.open(path)
    else:
        store = gitmem.init(path, bare=True)
    db = store.db()
    rng = random.Random(7)
    started = time.perf_counter()
    for i in range(creates):
        fields = fields_for(i, rng)
        store.create(fields.body, **fields.create_kwargs())
    if db.autopack.launched:
        autopack.wait_idle(db.gitdir, db.autopack.last_launch, timeout=600)
    shipped = _limits(path)
    loose_only = autopack.Thresholds(256, 0, 0, shipped.window, shipped.threads)  # no roll-up
    db.autopack.enabled = False
    for extra in range(4):  # packs to roll up, by the helper's own loose repacks
        for i in range(800):
            fields = fields_for(creates + 800 * extra + i, rng)
            store.create(fields.body, **fields.create_kwargs())
        if autopack.run(path, limits=loose_only) < 1:
            raise SystemExit(f"{path}: the loose repack did not run (a helper still at work?)")
    print(
        f"{path}: {creates + 3200:,} creates in {time.perf_counter() - started:.0f} s, "
        f"{len(autopack.packs_by_size(path / 'objects'))} packs"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--simulate", action="store_true")
    parser.add_argument("--sizes", default="100,1000", help="store sizes to simulate, MB")
    parser.add_argument("--batch-mb", type=float, default=1.2)
    parser.add_argument("--limit", type=int, default=autopack.DEFAULT_PACK_LIMIT)
    parser.add_argument("--store", type=Path)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--build", type=Path)
    parser.add_argument("--creates", type=int, default=100_000)
    parser.add_argument("--from", dest="source", type=Path, help="--build from a copy of this")
    args = parser.parse_args(argv)
    if args.build:
        build(args.build, args.creates, args.source)
    if args.simulate:
        print(f"one pack of {args.batch_mb} MB a loose repack, at most {args.limit} packs")
        for store_mb in (float(s) for s in args.sizes.split(",")):
            for name, rule in RULES.items():
                ratio, rollups, most, widest = simulate(
                    store_mb, args.batch_mb, args.limit, rule
                )
                print(
                    f"  {store_mb:,.0f} MB, {name}: copied {ratio:.1f}x the store, "
                    f"{rollups} roll-ups, at most {most} packs, the largest roll-up "
                    f"{widest:.0%} of the packs beside it"
                )
    if args.store:
        measure(args.store, args.rounds)
    if not (args.build or args.simulate or args.store):
        parser.print_usage(sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
