"""How hard the property and fuzz tests search: the hypothesis profile, `HYPOTHESIS_PROFILE`.

- `ci` (the default, what `.ci/run` runs): every property and fuzz test at a fixed, smaller
  budget, reproducible (`derandomize`), so the whole suite stays within minutes on 2 cores;
- `slow`: the full budgets (the fuzz tests' 10,800 cases, 100 examples per property), for a
  change to the runtime or the decoders: `HYPOTHESIS_PROFILE=slow .venv/bin/python -m pytest
  tests/test_fuzz_runtime.py tests/test_properties.py`.

conftest.py registers both with hypothesis and loads the chosen one, so a test without its own
`max_examples` follows it too; the tests with their own budget size it with `examples`.
"""

from __future__ import annotations

import os

PROFILES = ("ci", "slow")
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
if PROFILE not in PROFILES:
    raise ValueError(f"HYPOTHESIS_PROFILE={PROFILE!r}: use one of {PROFILES}")
CI_SHARE = 6  # the ci profile runs a sixth of each full budget


FULL = PROFILE == "slow"

# mypy arguments that leave out a generated package's `testing/` subpackage (the conformance kit:
# the same source in every package) unless the profile is slow. Used for the hand-made shape
# schemas, whose packages vary in types.py; tests/test_releases.py checks the kit against every
# published schema, the goldens included, under either profile.
MYPY_CORE = [] if FULL else ["--exclude", "/testing/"]


def examples(full: int) -> int:
    """The examples a test with a full budget of `full` runs under the chosen profile."""
    return full if PROFILE == "slow" else max(10, full // CI_SHARE)
