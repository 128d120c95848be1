"""Rule API, plugin registry, runner, findings, verdicts and renderers."""
