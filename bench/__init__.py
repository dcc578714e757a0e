"""gitmem benchmarks: every figure beside a baseline measured in the same run.

Run them all with ``python -m bench`` (``--quick`` for a one-minute pass, ``--tiny`` to
prove the command works). Scenarios live in :mod:`bench.scenarios` and register themselves
with :func:`bench.harness.scenario`; see ``docs/benchmarks.md`` for what each measures.
"""
