"""`python -m cakegov`: the same as the `cakegov` command."""

from cakegov.cli import main

main()
