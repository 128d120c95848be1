"""Witness traces as finding evidence: the text renderer prints `witness`, JSON carries
both, SARIF turns `witness_steps` into a codeFlow."""

from __future__ import annotations

from typing import Any

from cakegov.analysis.explore import Anomaly


def witness_evidence(anomaly: Anomaly, **extra: Any) -> dict[str, Any]:
    """Evidence for a finding backed by an exploration anomaly."""
    return {
        "anomaly": anomaly.kind,
        "witness": [text for _, text in anomaly.witness],
        "witness_steps": [{"line": line, "text": text} for line, text in anomaly.witness],
        **extra,
    }


def find(anomalies: list[Anomaly], kind: str | tuple[str, ...], *, resource: str | None = None,
         line: int | None = None) -> Anomaly | None:
    """The first anomaly of a kind, optionally about a resource or a source line; the
    anomalies come from a breadth-first search, so the first has the shortest witness."""
    kinds = (kind,) if isinstance(kind, str) else kind
    for anomaly in anomalies:
        if anomaly.kind not in kinds:
            continue
        if resource is not None and anomaly.resource != resource:
            continue
        if line is not None and line not in {e.line for e in anomaly.events}:
            continue
        return anomaly
    return None
