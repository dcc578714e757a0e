"""Lifecycle rules over a store: staleness and code-aware staleness (anchors).

Each returns a typed result with ``to_dict()``; the command line and hooks call the same
functions.
"""

from __future__ import annotations

from gitmem.features.lifecycle.anchors import (
    anchors_of,
    backtick_paths,
    check_project,
)
from gitmem.features.lifecycle.staleness import (
    Staleness,
    StalenessPolicy,
    StalenessRecord,
    classify,
    days_since,
    staleness_report,
    store_staleness,
)

__all__ = [
    "Staleness",
    "StalenessPolicy",
    "StalenessRecord",
    "anchors_of",
    "backtick_paths",
    "check_project",
    "classify",
    "days_since",
    "staleness_report",
    "store_staleness",
]
