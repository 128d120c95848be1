"""Aliased shared memory in the protocol analysis: which races cross two names.

A view declared with `alias=` starts at its root's offset (cakegov/lower/layout.py), so
its stages fall into the same exploration regions as the root's bytes (program.py merges
overlapping byte spans into one region) and every access through either name is checked
against every access through the other: nothing here changes the exploration. This module
only answers, for the rules, whether a race the exploration found is one between two
different names of the same bytes (a write through the alias while the aliased stage may
still be read or written, or the reverse)."""

from __future__ import annotations

from cakegov.analysis.execute import Anomaly


def aliased_pair(anomaly: Anomaly) -> tuple[str, str, int, int] | None:
    """(first name, second name, first stage, second stage) when `anomaly` is a race whose
    two accesses reach overlapping bytes through different shared-memory views."""
    if anomaly.kind != "race" or len(anomaly.events) != 2:
        return None
    second, first = anomaly.events
    for m2 in second.mem:
        if m2.space != "smem" or m2.name != anomaly.resource:
            continue
        for m1 in first.mem:
            if m1.space == "smem" and m1.region == m2.region and m1.name != m2.name \
                    and (m1.write or m2.write) and m1.mask & m2.mask:
                return m1.name, m2.name, m1.stage, m2.stage
    return None
