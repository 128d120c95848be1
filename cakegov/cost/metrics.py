"""Ranking metrics of predictions against measurements (pure functions over numbers).

Within one group (one workload, shape and device): Spearman's rho and Kendall's tau-b,
pairwise ordering accuracy, top-1/top-5 recall of the measured best, top-k regret (the
best measured time over the best measured time among the predicted top k; 1 is no
regret). Over all records: the median absolute percentage error."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing their average rank."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    out = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            out[order[k]] = (i + j) / 2 + 1
        i = j + 1
    return out


def spearman(pred: Sequence[float], meas: Sequence[float]) -> float | None:
    if len(pred) < 2:
        return None
    a, b = np.asarray(ranks(pred)), np.asarray(ranks(meas))
    a, b = a - a.mean(), b - b.mean()
    den = math.sqrt(float((a * a).sum() * (b * b).sum()))
    return float((a * b).sum() / den) if den else None


def kendall(pred: Sequence[float], meas: Sequence[float]) -> float | None:
    """Kendall's tau-b (ties in either sequence corrected)."""
    n = len(pred)
    if n < 2:
        return None
    conc = disc = tp = tm = 0
    for i in range(n):
        for j in range(i + 1, n):
            dp, dm = pred[i] - pred[j], meas[i] - meas[j]
            if dp == 0 and dm == 0:
                continue
            if dp == 0:
                tp += 1
            elif dm == 0:
                tm += 1
            elif (dp > 0) == (dm > 0):
                conc += 1
            else:
                disc += 1
    den = math.sqrt((conc + disc + tp) * (conc + disc + tm))
    return (conc - disc) / den if den else None


def pairwise_accuracy(pred: Sequence[float], meas: Sequence[float]) -> float | None:
    """Of the pairs whose measured times differ, the fraction the prediction orders the
    same way (a predicted tie counts one half)."""
    good, total = 0.0, 0
    for i in range(len(pred)):
        for j in range(i + 1, len(pred)):
            dm = meas[i] - meas[j]
            if dm == 0:
                continue
            total += 1
            dp = pred[i] - pred[j]
            good += 0.5 if dp == 0 else float((dp > 0) == (dm > 0))
    return good / total if total else None


def _predicted_top(pred: Sequence[float], k: int) -> list[int]:
    return sorted(range(len(pred)), key=lambda i: (pred[i], i))[:k]


def top_k_recall(pred: Sequence[float], meas: Sequence[float], k: int) -> float | None:
    if not pred:
        return None
    best = min(meas)
    return float(any(meas[i] == best for i in _predicted_top(pred, k)))


def top_k_regret(pred: Sequence[float], meas: Sequence[float], k: int) -> float | None:
    if not pred:
        return None
    chosen = min(meas[i] for i in _predicted_top(pred, k))
    return min(meas) / chosen if chosen > 0 else None


def mape(pred: Sequence[float], meas: Sequence[float]) -> float | None:
    """Median absolute percentage error, as a fraction."""
    errs = [abs(p - m) / m for p, m in zip(pred, meas, strict=True) if m > 0]
    return float(np.median(errs)) if errs else None


GROUP_METRICS = ("spearman", "kendall", "pairwise", "top1_recall", "top5_recall",
                 "top1_regret", "top5_regret")


def group_metrics(pred: Sequence[float], meas: Sequence[float]) -> dict[str, float | None]:
    return {"spearman": spearman(pred, meas), "kendall": kendall(pred, meas),
            "pairwise": pairwise_accuracy(pred, meas),
            "top1_recall": top_k_recall(pred, meas, 1),
            "top5_recall": top_k_recall(pred, meas, 5),
            "top1_regret": top_k_regret(pred, meas, 1),
            "top5_regret": top_k_regret(pred, meas, 5), "n": float(len(pred))}


def evaluate(groups: Mapping[str, tuple[Sequence[float], Sequence[float]]]
             ) -> dict[str, object]:
    """Metrics per group (groups of two or more candidates rank) and their means."""
    per = {key: group_metrics(p, m) for key, (p, m) in sorted(groups.items()) if len(p) >= 2}
    summary: dict[str, float | None] = {}
    for name in GROUP_METRICS:
        vals = [g[name] for g in per.values() if g[name] is not None]
        summary[name] = float(np.mean(vals)) if vals else None
    allp = [x for p, _ in groups.values() for x in p]
    allm = [x for _, m in groups.values() for x in m]
    summary["mape"] = mape(allp, allm)
    summary["records"] = float(len(allp))
    summary["groups"] = float(len(per))
    return {"summary": summary, "groups": per}
