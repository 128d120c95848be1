"""cakegov: a governed verifier for GPU kernel schedules."""

__version__ = "0.1.0"
