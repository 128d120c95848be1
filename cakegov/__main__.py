"""`python -m cakegov`: the same as the `cakegov` command."""

from cakegov.launch import main

main()
