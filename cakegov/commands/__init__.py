"""The command layer: one module per command group, each registered by cakegov/cli.py
(which only builds the Typer app), all of them on cakegov/commands/shared.py. Imports point
down only: nothing outside this package imports a command module, a command module imports
no other command module, and each imports what its command runs when it runs."""
