"""gitmem benchmarks: every figure beside a baseline measured in the same run.

``python -m bench`` runs the scenarios (``--quick``, ``--tiny``, ``--list``); each module
registers its own with :func:`bench.harness.scenario`. docs/benchmarks.md has the figures.
"""
