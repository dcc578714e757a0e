"""gitmem.yaml as gitmem init writes it reads back as the store it describes."""

from __future__ import annotations

import pytest

from gitmem.format.config import DEFAULT_MAX_BODY_BYTES, FORMAT, StoreConfig, initial_text
from gitmem.format.model import Scope
from gitmem.format.yamlio import load_yaml


@pytest.mark.parametrize("scope", list(Scope))
def test_the_initial_text_reads_back(scope: Scope) -> None:
    text = initial_text(scope)
    config = StoreConfig.from_text(text)
    assert (config.scope, config.format, config.max_body_bytes) == (
        scope,
        FORMAT,
        DEFAULT_MAX_BODY_BYTES,
    )
    assert config.raw == load_yaml(text)[0]
