"""Claude's memory tool: gitmem's backend beside the ``anthropic`` SDK's own local-filesystem
implementation (``BetaLocalFilesystemMemoryTool``), like for like.

``memtool``: ``create`` of a new file and ``view`` of an existing one, alternating run by
run, each on a fresh bare store / a fresh directory: both fsync (the SDK always fsyncs a
created file; gitmem with ``durable=True``), and both without (the SDK's ``os.fsync``
replaced by a no-op for its runs; gitmem ``durable=False``). Issue 14's target: within
1.5x of the SDK's tool.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from bench.fixtures import Context
from bench.harness import Row, Timed, log, measure_alternating, ms, scenario
from bench.scenarios import _fsync


def _needs_sdk() -> str | None:
    try:
        from anthropic.lib.tools._beta_builtin_memory_tool import (  # noqa: F401
            BetaLocalFilesystemMemoryTool,
        )
    except ImportError:
        return "the anthropic SDK is not installed"
    return None


@contextmanager
def _no_fsync(off: bool) -> Iterator[None]:
    real = os.fsync
    if off:
        os.fsync = lambda fd: None
    try:
        yield
    finally:
        os.fsync = real


@scenario("memtool", "memory tool create/view beside the anthropic SDK's filesystem tool",
          requires=_needs_sdk)  # fmt: skip
def memtool(ctx: Context) -> list[Row]:
    from anthropic.lib.tools._beta_builtin_memory_tool import BetaLocalFilesystemMemoryTool
    from anthropic.types.beta import (
        BetaMemoryTool20250818CreateCommand as Create,
    )
    from anthropic.types.beta import (
        BetaMemoryTool20250818ViewCommand as View,
    )

    import gitmem
    from gitmem.entry.memtool import MemoryTool

    config = ctx.config
    rows: list[Row] = []
    text = "".join(f"line {i} of a note the model keeps\n" for i in range(20))
    try:
        for durable in (True, False):
            root = ctx.new_dir(f"memtool-{'fsync' if durable else 'plain'}")
            store = gitmem.init(root / "store.git", bare=True)
            tool = MemoryTool(gitmem.open(store.path, durable=durable))
            sdk: Any = BetaLocalFilesystemMemoryTool(base_path=tempfile.mkdtemp(dir=root))

            def mine_create(i: int, tool: MemoryTool = tool, durable: bool = durable) -> None:
                _fsync(durable)
                tool.create(f"/memories/note-{i}.md", text)

            def sdk_create(i: int, sdk: Any = sdk, durable: bool = durable) -> None:
                with _no_fsync(not durable):
                    sdk.create(Create(command="create", path=f"/memories/note-{i}.md",
                                      file_text=text))  # fmt: skip

            def mine_view(i: int, tool: MemoryTool = tool) -> None:
                tool.view(f"/memories/note-{i % config.ops}.md")

            def sdk_view(i: int, sdk: Any = sdk) -> None:
                sdk.view(View(command="view", path=f"/memories/note-{i % config.ops}.md"))

            kind = "both fsync (gitmem durable=True)" if durable else "neither fsyncs"
            log(f"memtool: create and view, {kind}")
            c_mine, c_sdk = measure_alternating(
                [Timed(mine_create, config.ops, config.warmup),
                 Timed(sdk_create, config.ops, config.warmup)], config.repeat)  # fmt: skip
            v_mine, v_sdk = measure_alternating(
                [Timed(mine_view, config.ops, config.warmup),
                 Timed(sdk_view, config.ops, config.warmup)], config.repeat)  # fmt: skip
            for what, mine, base in (("create", c_mine, c_sdk), ("view", v_mine, v_sdk)):
                rows.append(
                    Row(f"memory tool `{what}`, {kind}", "new bare store", "ms p50",
                        ms(mine.p50), "anthropic SDK `BetaLocalFilesystemMemoryTool`",
                        ms(base.p50), higher_is_better=False, runs=mine.runs,
                        target="within 1.5x of the SDK",
                        note=f"{mine.rate:,.0f} vs {base.rate:,.0f} calls/s")
                )
    finally:
        _fsync(False)
    return rows
