"""Lifecycle rules over a store: staleness and code-aware staleness (anchors).

Each returns a typed result with ``to_dict()``; the command line and hooks call the same
functions.
"""

from __future__ import annotations

from gitmem.features.lifecycle.anchors import (
    AnchorFinding,
    CheckedMemory,
    CheckReport,
    anchors_of,
    backtick_paths,
    check_project,
)
from gitmem.features.lifecycle.staleness import (
    Staleness,
    StalenessEntry,
    StalenessPolicy,
    StalenessRecord,
    StalenessReport,
    classify,
    days_since,
    record_from_text,
    staleness_report,
    store_staleness,
)

__all__ = [
    "AnchorFinding",
    "CheckReport",
    "CheckedMemory",
    "Staleness",
    "StalenessEntry",
    "StalenessPolicy",
    "StalenessRecord",
    "StalenessReport",
    "anchors_of",
    "backtick_paths",
    "check_project",
    "classify",
    "days_since",
    "record_from_text",
    "staleness_report",
    "store_staleness",
]
