"""Everyday commands as processes: what an agent calling the CLI in a loop waits for.

``gitmem ls``, ``search``, ``show`` and ``add`` are timed as processes (the console script
beside this Python, as after ``pip install``) on a bare store of ``--sizes``' read size
(medium preset: 1,000 memories) whose index is caught up, each beside the git command that
does the nearest thing, alternating run by run. ``python -c pass`` (the interpreter's own
start) and ``gitmem --version`` (the command line's imports, no store) are rows of their own,
so the notes can say where the time goes. Issue 16's targets: ls, search, show <= 100 ms,
add <= 150 ms, median wall on an idle machine.
"""

from __future__ import annotations

import compileall
import sys
from pathlib import Path

import gitmem
from bench.fixtures import Context
from bench.harness import (
    Row,
    cli_env,
    command_timed,
    log,
    measure_alternating,
    ms,
    scenario,
    size_label,
)

TARGETS = {"ls": 100.0, "search": 100.0, "show": 100.0, "add": 150.0, "recall": 100.0}
EMBEDDER_LOAD = (
    "from gitmem.store.embed.static import load_default; "
    "load_default().embed(['how do we run the migration?'])"
)
"""The default embedder's load as a process of its own (numpy, tokenizers, the table and
one query embedded): recall's target is 100 ms plus this, less the interpreter's start."""


def _gitmem() -> list[str]:
    script = Path(sys.executable).parent / "gitmem"
    return [str(script)] if script.exists() else [sys.executable, "-m", "gitmem"]


@scenario("cli-latency", "everyday commands as processes (p50), beside git and python -c pass")
def cli_latency(ctx: Context) -> list[Row]:
    config = ctx.config
    # An installed gitmem has its bytecode; a development tree (PYTHONDONTWRITEBYTECODE
    # set) would have every process compile the sources it imports.
    compileall.compile_dir(str(Path(gitmem.__file__).parent), quiet=1)
    populated = ctx.bare_store(config.read_size)
    path = populated.path
    ctx.indexed(path)
    env = cli_env(ctx.new_dir("cli-no-user-store"))
    memory_id = populated.ids[len(populated.ids) // 2]
    from gitmem.format.layout import memory_path

    gm = [*_gitmem(), "--store", str(path)]
    git = ["git", "-C", str(path)]
    cases = [
        ("ls", [*gm, "ls"], [*git, "ls-tree", "-r", "--name-only", "HEAD"], "git ls-tree -r"),
        (
            "search",
            [*gm, "search", "migration"],
            [*git, "grep", "-c", "migration", "HEAD"],
            "git grep HEAD",
        ),
        (
            "show",
            [*gm, "show", memory_id],
            [*git, "show", f"HEAD:{memory_path(memory_id)}"],
            "git show HEAD:path",
        ),
        (
            "recall",
            [*gm, "recall", "how do we run the migration?"],
            [sys.executable, "-c", EMBEDDER_LOAD],
            "the default embedder's load (python -c ...)",
        ),
        (
            "add",
            [*gm, "add", "A memory added by the benchmark.", "--title", "bench"],
            [*git, "commit-tree", "HEAD^{tree}", "-p", "HEAD", "-m", "bench"],
            "git commit-tree (a commit object, no ref update)",
        ),
    ]
    floor = command_timed([sys.executable, "-c", "pass"], path, env)
    version = command_timed([*_gitmem(), "--version"], path, env)
    floor_stats, version_stats = measure_alternating([floor, version], config.repeat)
    rows = [
        Row(
            "CLI: gitmem --version (imports, no store)",
            "-",
            "p50 ms",
            ms(version_stats.p50),
            "`python -c pass`",
            ms(floor_stats.p50),
            higher_is_better=False,
            runs=version_stats.runs,
            note="what every command pays before it opens a store",
        )
    ]
    for name, command, baseline, baseline_name in cases:
        log(f"cli-latency: gitmem {name}")
        ours = command_timed(command, path, env)
        theirs = command_timed(baseline, path, env)
        stats, base = measure_alternating([ours, theirs], config.repeat)
        value = ms(stats.p50)
        target = TARGETS[name]
        note = f"python -c pass: {ms(floor_stats.p50):.0f} ms in the same run"
        if name == "recall":
            # recall's own share: its wall less what the embedder's load adds to a process.
            target += ms(base.p50) - ms(floor_stats.p50)
            note += f"; recall less the embedder's load: {value - target + 100:.0f} ms"
        rows.append(
            Row(
                f"CLI: gitmem {name}",
                f"{size_label(populated.size)} memories",
                "p50 ms",
                value,
                f"`{baseline_name}`",
                ms(base.p50),
                higher_is_better=False,
                runs=stats.runs,
                target=f"≤ {target:.0f} ms (idle machine)"
                + (" = 100 + the embedder's load" if name == "recall" else ""),
                met=value <= target,
                note=note,
            )
        )
    return rows
