"""Witness traces as finding evidence, stored once: `witness` is the list of steps
(`{"line": ..., "text": ...}`) from the start of the execution to the anomaly; the text
renderer prints its end, JSON carries it whole, SARIF turns it into a codeFlow."""

from __future__ import annotations

from typing import Any

from cakegov.analysis.execute import Anomaly


def witness_evidence(anomaly: Anomaly, **extra: Any) -> dict[str, Any]:
    """Evidence for a finding backed by an anomaly of the protocol analysis."""
    return {
        "anomaly": anomaly.kind,
        "witness": [{"line": line, "text": text} for line, text in anomaly.witness],
        **extra,
    }
