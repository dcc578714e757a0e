"""gitmem.yaml as gitmem init writes it reads back as the store it describes."""

from __future__ import annotations

import re

import pytest

from gitmem.base.errors import InvalidMemoryError
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


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("- a\n", "gitmem.yaml must be a mapping"),
        ("scope: team\n", "gitmem.yaml scope: 'team' is not one of ['repo', 'user']"),
        ("format: 0\n", "gitmem.yaml format: 0 is less than the minimum of 1"),
        ("limits: 3\n", "gitmem.yaml limits: 3 is not of type 'object'"),
        ("limits: {max_body_bytes: yes}\n", "limits.max_body_bytes: True is not of type"),
        ("secrets: {patterns: [{kind: k}]}\n", "secrets.patterns.0.regex: required field is"),
    ],
)
def test_a_broken_gitmem_yaml_names_the_key(text: str, complaint: str) -> None:
    with pytest.raises(InvalidMemoryError, match=re.escape(complaint)):
        StoreConfig.from_text(text)
    with pytest.raises(InvalidMemoryError, match=re.escape("LOCAL: limits.max_body_bytes: 0 is")):
        StoreConfig.from_text("").with_local({"limits": {"max_body_bytes": 0}}, "LOCAL")
