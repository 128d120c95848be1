"""The `cakegov` console entry point. A plain check whose result is remembered
(cakegov/check/result_cache.py) is answered here, before the command line module and
what it imports (typer, pydantic, numpy) are loaded; everything else goes to
`cakegov.cli.run_argv`."""

from __future__ import annotations

import sys


def main() -> None:
    from cakegov.check.result_cache import serve

    argv = sys.argv[1:]
    key = serve(argv)  # a remembered result is written out, and the process exits here
    from cakegov.cli import run_argv

    run_argv(argv, key)
