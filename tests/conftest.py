from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GENERATED = ROOT / "generated"
FIXTURES = Path(__file__).resolve().parent / "fixtures"

# Tests import the generated packages by name: generated/agent -> `agent`, generated/client -> `client`.
sys.path.insert(0, str(GENERATED))
# Keep the formatter cache inside the checkout's own temp area, never the user's home.
os.environ.setdefault("ACP_CODEGEN_CACHE_DIR", str(ROOT / ".pytest_cache" / "acp-codegen-black"))


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT
