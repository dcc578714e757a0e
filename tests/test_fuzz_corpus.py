"""Replays every input the fuzzer kept (tests/fuzz_corpus/<target>/, the crashes it found,
each fixed) and the seeds it starts from (fuzz/seeds/<target>/) through the same targets.

The targets raise only on a bug (fuzz/targets.py), so a regression of any fixed crash
fails here, in CI, without the fuzzer. The soak itself: docs/security.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from fuzz.targets import TARGETS  # noqa: E402  (the repository root is not a package path)

CORPUS = [
    pytest.param(target, path, id=f"{target}/{path.parent.parent.name}/{path.name}")
    for folder in (ROOT / "tests" / "fuzz_corpus", ROOT / "fuzz" / "seeds")
    for target in sorted(TARGETS)
    for path in sorted((folder / target).glob("*"))
    if path.is_file()
]


@pytest.mark.parametrize(("target", "path"), CORPUS)
def test_replay(target: str, path: Path) -> None:
    TARGETS[target](path.read_bytes())


def test_every_target_has_seeds() -> None:
    for target in TARGETS:
        assert any((ROOT / "fuzz" / "seeds" / target).iterdir()), target
