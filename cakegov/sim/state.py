"""The models every stage of the CPU simulator shares: what a run found, and the
exceptions that end one.

A simulated run ends in one of four ways: every CTA finished and the outputs matched the
reference (`correct`), a dynamic defect showed (`defect`, with the kind, a sentence and a
witness: the steps of the execution that lead to it, in the checker's witness format,
cakegov/analysis/witness.py), the kernel uses something the simulator does not model
(`not simulated`), or an explicit event bound was hit (`incomplete`). Bounds count
events, never seconds, so the same inputs give the same result on every machine."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# Defect kinds, as the first words of a defect's detail ("deadlock: ...").
DEADLOCK = "deadlock"
RACE = "race"
UNINIT = "uninitialised read"
WRONG = "wrong result"
OOB = "out of bounds"
INFLIGHT = "in flight at exit"
OVER_ARRIVAL = "over-arrival"
BARRIER = "barrier misuse"
KINDS = (DEADLOCK, RACE, UNINIT, WRONG, OOB, INFLIGHT, OVER_ARRIVAL, BARRIER)

CORRECT = "correct"
DEFECT = "defect"
NOT_SIMULATED = "not simulated"
INCOMPLETE = "incomplete"

WITNESS_STEPS = 40  # steps of the execution kept before the anomaly


@dataclass(frozen=True)
class Defect:
    """A dynamic defect the simulator reproduced."""

    kind: str
    message: str
    line: int
    witness: tuple[tuple[int, str], ...] = ()

    @property
    def detail(self) -> str:
        return f"{self.kind}: {self.message}"

    def witness_json(self) -> list[dict[str, Any]]:
        return [{"line": line, "text": text} for line, text in self.witness]


class DefectFound(Exception):
    """Raised inside the machine to end a run at the first defect."""

    def __init__(self, defect: Defect):
        super().__init__(defect.detail)
        self.defect = defect


class NotSimulated(Exception):
    """The kernel uses a construct the simulator does not model (the reason says which)."""


class EventBound(Exception):
    """The run hit its event bound."""


@dataclass
class RunResult:
    """One simulated run: one strategy, seed and shape over a set of CTAs."""

    strategy: str
    seed: int
    shape: dict[str, int]
    ctas: list[tuple[int, int, int]]
    outcome: str  # correct | defect | not simulated | incomplete
    detail: str
    defect: Defect | None = None
    events: int = 0
    cta: tuple[int, int, int] | None = None  # the CTA where the run ended, if it ended early
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        shape = ",".join(f"{k}={v}" for k, v in self.shape.items())
        cta = self.cta if self.cta is not None else (
            self.ctas[0] if len(self.ctas) == 1 else None)
        return {"strategy": self.strategy, "seed": self.seed, "shape": shape,
                "cta": list(cta) if cta is not None else f"{len(self.ctas)} CTAs",
                "outcome": self.outcome, "detail": self.detail}
