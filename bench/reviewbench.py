"""What ``gitmem review`` of a pull request costs, beside ``git log -p`` of the same range.

The range is the shape issue 15 states: N memories (1,000 in the full preset), each changed
in a commit of its own on top of the commit that created them all. Timed in-process: the
review and its markdown rendering, as ``gitmem review BASE..HEAD`` does them. The baseline,
alternating with it, is ``git log -p BASE..HEAD -- memories`` on the same bare repository:
what a person reads without gitmem (no problems found, no per-memory summary).
"""

from __future__ import annotations

import bench.doctorbench  # noqa: F401  (registered first: scenarios run in registration order)
import gitmem
from bench.fixtures import Context
from bench.harness import Row, Stopwatch, Timed, git, log, measure_alternating, ms, scenario
from gitmem.features import review as reviewing

SIZES = {"full": 1_000, "quick": 300, "tiny": 30}


@scenario("review", "gitmem review of a range changing N memories, beside git log -p")
def review_range(ctx: Context) -> list[Row]:
    size = SIZES.get(ctx.config.mode, 1_000)
    path = ctx.new_dir("review") / "store.git"
    store = gitmem.open(gitmem.init(path, bare=True).path)
    log(f"writing {size:,} memories, then one commit per changed memory...")
    with Stopwatch() as built:
        with store.transaction(message="seed"):
            ids = [
                store.create(f"Fact {i}.\nSecond line.\n", title=f"fact {i}", agent="seeder").id
                for i in range(size)
            ]
        tip = store.db().tip()
        assert tip is not None
        base = str(tip.id)
        for i, memory_id in enumerate(ids):
            store.update(memory_id, f"Fact {i}, corrected.\nSecond line.\n", agent="editor")
    log(f"  {built.seconds:.1f} s")
    spec = f"{base}..HEAD"

    def op(_: int) -> None:
        result = reviewing.review(store, spec)
        if len(result.changes) != size or len(result.commits) != size:
            raise AssertionError(f"review saw {len(result.changes)} changes")
        reviewing.render(result)

    def git_op(_: int) -> None:
        git(path, "log", "-p", "--no-color", spec, "--", "memories")

    repeat = max(1, min(ctx.config.repeat, ctx.config.slow_repeat))
    stats, baseline = measure_alternating([Timed(op, 1, 1), Timed(git_op, 1, 1)], repeat)
    seconds = stats.p50
    return [
        Row(
            "review of a range, markdown rendered",
            f"{size:,} changed memories in {size:,} commits",
            "ms",
            ms(seconds),
            "`git log -p BASE..HEAD -- memories`",
            ms(baseline.p50),
            higher_is_better=False,
            runs=stats.runs,
            target="≤ 5 s at 1,000 changed memories (issue 15)",
            met=seconds <= 5.0 if size >= 1_000 else None,
            note="in-process; one tree diff per commit, one decode per changed memory",
        )
    ]
