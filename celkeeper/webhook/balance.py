"""Spreading connections over the workers of one server.

All workers wait on the one listening socket, and whichever the kernel wakes first accepts: with idle
workers, one of them may take most connections of a burst (a client's keep-alive connections then
stay with it: half the server idle under load). Each worker therefore publishes how many connections
it holds, in a little memory the master shares with every worker it forks (`LoadBoard`, one slot per
worker, assigned by the master); a worker holding more than its least-loaded sibling does not accept
a new connection at once but leaves it DEFER seconds to that sibling, and accepts it itself only if
it is still waiting then (the sibling may be busy evaluating a request). The least-loaded worker
always accepts at once, so a connection never waits more than DEFER for lack of a worker.
"""

from __future__ import annotations

import mmap

DEFER = 0.005  # seconds a worker that is not the least loaded leaves a new connection to the others
SLOTS = 64  # workers of one server at once (configured + the ones being replaced)
_FREE = -1
_AWAY = -2  # claimed by a worker that does not accept (still loading, stopping or full)


class LoadBoard:
    """Connection counts of the workers, in memory shared across fork(). The master claims and
    releases slots; each worker writes its own slot and reads the others'."""

    def __init__(self) -> None:
        self._mem = mmap.mmap(-1, 4 * (SLOTS + 1))
        self._counts = memoryview(self._mem).cast("i")  # one per slot, then the slots ever claimed
        for i in range(SLOTS):
            self._counts[i] = _FREE
        self._counts[SLOTS] = 0

    def claim(self) -> int:
        """(master) A free slot for a worker about to be forked, -1 when there is none."""
        for i in range(SLOTS):
            if self._counts[i] == _FREE:
                self._counts[i] = _AWAY
                self._counts[SLOTS] = max(self._counts[SLOTS], i + 1)
                return i
        return -1

    def release(self, slot: int) -> None:
        """(master, or the worker itself as it leaves) The slot is free again."""
        if 0 <= slot < SLOTS:
            self._counts[slot] = _FREE

    def publish(self, slot: int, connections: int | None) -> None:
        """(worker) How many connections it holds; None: it does not accept now."""
        if 0 <= slot < SLOTS:
            self._counts[slot] = _AWAY if connections is None else connections

    def least_other(self, slot: int) -> int | None:
        """The fewest connections any other accepting worker holds (None when there is none)."""
        counts = self._counts
        least = None
        for i in range(counts[SLOTS]):  # only the slots ever claimed (a few)
            n = counts[i]
            if i != slot and n >= 0 and (least is None or n < least):
                least = n
        return least
