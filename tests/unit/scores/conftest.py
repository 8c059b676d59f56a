"""Fixtures of the score tests."""

from __future__ import annotations

import pytest
from score_fixtures import train_tiny_model

from possym.model.gptj import GPTJ


@pytest.fixture(scope="session")
def trained_model() -> GPTJ:
    return train_tiny_model()
