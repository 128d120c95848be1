"""Synchronise the lanes of the calling warp (`__syncwarp()`): orders every lane's earlier
shared-memory writes before an elected lane's arrive."""

from cakegov.plugin import BarrierAction, Effects

NAME = "syncwarp"
VERSION = "1.0.0"
SPELLING = "lm.syncwarp"
CATEGORY = "sync"
ARGS = ()


def effects(call, view):
    return Effects(barriers=(BarrierAction(op="sync", barrier="warp"),))
