"""Hypothesis profiles: `ci` keeps every property test's full example count, `dev` runs a
tenth of it (at least 5) so the quick tier stays quick.

The profile is chosen once per run, in tests/conftest.py: `HYPOTHESIS_PROFILE` when set
(.ci/run sets `ci`), otherwise `dev` for the quick tier (`-m "not slow"`) and `ci` for
everything else. A property test writes its count as `examples(n)`, n being the CI count."""

from __future__ import annotations

import os

from hypothesis import settings

ENV = "HYPOTHESIS_PROFILE"
PROFILES = ("ci", "dev")
DEV_SHARE = 10  # dev runs 1/DEV_SHARE of the CI examples
DEV_MIN = 5

settings.register_profile("ci")  # Hypothesis's defaults: 100 examples unless a test says
settings.register_profile("dev", max_examples=100 // DEV_SHARE)


def choose(markexpr: str) -> str:
    """The profile for a run with this `-m` expression (the environment wins)."""
    chosen = os.environ.get(ENV) or ("dev" if "not slow" in " ".join(markexpr.split())
                                     else "ci")
    if chosen not in PROFILES:
        raise ValueError(f"{ENV}={chosen!r}: expected one of {', '.join(PROFILES)}")
    return chosen


def activate(name: str) -> None:
    os.environ[ENV] = name  # pytest-xdist workers and test modules read it back
    settings.load_profile(name)


def current() -> str:
    return os.environ.get(ENV, "ci")


def examples(ci_count: int) -> int:
    """A property test's example count under the current profile."""
    return ci_count if current() == "ci" else max(DEV_MIN, ci_count // DEV_SHARE)
