"""Exit statuses of every `cakegov` command (DESIGN.md, Findings and verdicts).

Standard library only, so that the command line can name them without loading models."""

EXIT_CLEAN, EXIT_REJECTED, EXIT_USAGE, EXIT_INCOMPLETE, EXIT_INTERNAL = 0, 1, 2, 3, 101
