"""How much the suite's broadest tests cover: the profile, `HYPOTHESIS_PROFILE`.

- `ci` (the default, what `.ci/run` runs), so the whole suite stays within minutes on 2 cores:
  every property and fuzz test at a fixed, smaller budget, reproducible (`derandomize`); the
  shape schemas' packages through mypy without their `testing/` kit (MYPY_CORE), and the
  releases' but for the goldens (tests/test_releases.py: KIT_FOR_ALL); pyright over the kit of
  generated/agent and generated/client only (conftest.py: `pyright_left_out`); the broken
  agents over stdio only where no in-process run checks the same class (test_conformance.py:
  BROKEN_STDIO), and upstream's SDK example agent through the checks it fails and a turn's
  core only (test_conformance.py: SDK_EXAMPLE); ruff and black compared on the default target's schema and the shape
  schemas (tests/test_format.py);
- `slow`: the full budgets (the fuzz tests' 10,800 cases, 100 examples per property), every
  kit, every broken agent over stdio, and ruff against black on every bundled schema: for a
  change to the runtime, the conformance kit, the decoders or the templates:
  `HYPOTHESIS_PROFILE=slow .venv/bin/python -m pytest`.

conftest.py registers both with hypothesis and loads the chosen one, so a test without its own
`max_examples` follows it too; the tests with their own budget size it with `examples`.
"""

from __future__ import annotations

import os

PROFILES = ("ci", "slow")
PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "ci")
if PROFILE not in PROFILES:
    raise ValueError(f"HYPOTHESIS_PROFILE={PROFILE!r}: use one of {PROFILES}")
CI_SHARE = 10  # the ci profile runs a tenth of each full budget (the suite's 5-minute target)


FULL = PROFILE == "slow"

# mypy arguments that leave out a generated package's `testing/` subpackage (the conformance kit:
# the same source in every package, reaching the schema only through names every package has)
# unless the profile is slow. Used for the hand-made shape schemas, whose packages vary in
# types.py; tests/test_releases.py checks the goldens' kits under either profile.
MYPY_CORE = [] if FULL else ["--exclude", "/testing/"]


def examples(full: int) -> int:
    """The examples a test with a full budget of `full` runs under the chosen profile."""
    return full if PROFILE == "slow" else max(10, full // CI_SHARE)
