"""Canonical JSON of a schedule and its sha256 identity.

Spans and IR paths are dropped (they describe where text sits, not what it means), keys
are sorted and no whitespace is emitted, so comments and formatting do not change the
identity while any semantic change does."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from cakegov.ir.nodes import Schedule

_NON_SEMANTIC = frozenset({"span", "path", "arg_spans", "target_span", "workload_span",
                           "doc"})


# Optional fields added after schedules had identities: left out while unset, so that
# every schedule that does not use them keeps its identity.
_OMIT_WHEN_NONE = frozenset({"alias", "tile", "counter"})
_OMIT_WHEN_FALSE = frozenset({"cluster_nonportable"})


def _strip(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in _NON_SEMANTIC
                and not (k in _OMIT_WHEN_NONE and v is None)
                and not (k in _OMIT_WHEN_FALSE and v is False)}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


def canonical_json(schedule: Schedule) -> str:
    data = _strip(schedule.model_dump(mode="json"))
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def schedule_sha256(schedule: Schedule) -> str:
    return hashlib.sha256(canonical_json(schedule).encode("ascii")).hexdigest()
