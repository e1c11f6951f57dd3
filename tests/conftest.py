from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "generated"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Tests import the generated packages by name: generated/agent -> `agent`, generated/client -> `client`.
sys.path.insert(0, str(GENERATED))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
