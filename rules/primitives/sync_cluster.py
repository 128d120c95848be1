"""Synchronise every thread of every CTA of the thread-block cluster
(`barrier.cluster.arrive.release.aligned` then `barrier.cluster.wait.acquire.aligned`,
cooperative groups' `cluster.sync()`): all roles of all CTAs of the cluster must reach
it, the same number of times, or the kernel hangs. Orders everything before it in every
CTA of the cluster before everything after it in any of them.

A CTA whose shared memory other CTAs of its cluster write (a multicast copy, a remote
`arrive(cta=...)`) must not exit while such a write may still be under way: the CUDA
programming guide ("Distributed Shared Memory") requires that all distributed
shared-memory operations complete before a thread block exits, which `lm.sync_cluster()`
at the end of every role guarantees."""

from cakegov.plugin import BarrierAction, Effects

NAME = "sync_cluster"
VERSION = "1.0.0"
SPELLING = "lm.sync_cluster"
CATEGORY = "sync"
ARGS = ()


def effects(call, view):
    return Effects(barriers=(BarrierAction(op="sync", barrier="cluster"),))
