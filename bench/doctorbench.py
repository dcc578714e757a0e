"""What ``gitmem doctor`` costs on a large store, beside the one part of it git also does.

Doctor runs ``git fsck --strict`` and then its own checks (locks, work tree, the index
against git, schema, links, chains, credentials, permissions). The timed command is
``python -m gitmem --store <store> doctor`` as a process, on a work-tree store of
``--sizes``' largest size (full preset: 10k memories) whose index is already caught up (the
store is in use; a cold index is ``index-rebuild``'s figure). The baseline, in the same run
and alternating with it, is ``git fsck --strict --no-dangling`` on the same repository: the
floor doctor cannot go below. The in-process row times each check alone, once, so the
notes say where the rest of the time goes. Timed runs find the credential scan's cache of
clean blobs warm (the untimed first run fills it); one more run without it is the last row.
"""

from __future__ import annotations

import sys
import time

import bench.hookrun  # noqa: F401  (registered first: scenarios run in registration order)
import gitmem
from bench.fixtures import Context
from bench.harness import Row, Stopwatch, log, measure_alternating, ms, scenario, size_label
from bench.hookrun import _process, hook_env
from gitmem.entry import doctor as doctor_mod
from gitmem.entry import doctor_memories


@scenario("doctor", "gitmem doctor as a process on a large store, beside git fsck")
def doctor_run(ctx: Context) -> list[Row]:
    config = ctx.config
    size = config.read_size
    populated = ctx.worktree_store(size)
    path = populated.path
    env = hook_env(ctx.new_dir("doctor-no-user-store"))
    python = sys.executable
    command = [python, "-m", "gitmem", "--store", str(path), "doctor"]
    # Untimed: register the merge driver (the only finding on a fresh store) and bring the
    # index up to the tip, so every timed run is the healthy, warm case.
    with Stopwatch() as first:
        _process([*command, "--fix"], path, env).timed.op(0)
    log(f"first doctor --fix (index catch-up included) {first.seconds:.1f} s")
    doctor = _process(command, path, env, b"healthy")
    fsck = _process(["git", "fsck", "--strict", "--no-dangling", "--no-progress"], path, env)
    calls = 1
    for item in (doctor, fsck):
        item.timed.ops = calls
        item.timed.warmup = 1
    repeat = max(1, min(config.repeat, config.slow_repeat))
    log(f"timing gitmem doctor and git fsck, {repeat} runs each")
    run, base = measure_alternating([doctor.timed, fsck.timed], repeat)
    # Once more without the credential scan's memory of clean blobs (what the first run
    # after a policy change, or after deleting the state directory, costs).
    cache = gitmem.open(path).db().state_dir / doctor_memories.CLEAN_BLOBS
    cache.unlink(missing_ok=True)
    with Stopwatch() as cold:
        _process(command, path, env, b"healthy").timed.op(0)
    # Each check alone, in-process, once: where the time goes.
    store = gitmem.open(path)
    per_check: list[tuple[str, float]] = []
    for name in doctor_mod.CHECKS:
        started = time.perf_counter()
        doctor_mod.diagnose(store, checks=[name])
        per_check.append((name, time.perf_counter() - started))
    per_check.sort(key=lambda item: -item[1])
    shown = ", ".join(f"{name} {ms(seconds):,.0f}" for name, seconds in per_check[:5])
    label = f"{size_label(size)} memories"
    return [
        Row(
            "`gitmem doctor` as a process (healthy store, index caught up)",
            label,
            "seconds",
            run.p50,
            "`git fsck --strict --no-dangling` on the same repository",
            base.p50,
            higher_is_better=False,
            runs=run.runs,
            note=f"CPU per call: {doctor.cpu_ms():,.0f} ms (git fsck {fsck.cpu_ms():,.0f} ms); "
            f"each check alone in-process, ms: {shown}; work-tree store",
        ),
        Row(
            "`gitmem doctor`, every blob scanned for credentials (no clean-blob cache)",
            label,
            "seconds",
            cold.seconds,
            "`git fsck --strict --no-dangling` on the same repository",
            base.p50,
            higher_is_better=False,
            runs=1,
            note="the first run, or the first after a change to the secrets policy",
        ),
    ]
