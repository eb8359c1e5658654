"""The load board the workers of one server share (celkeeper.webhook.balance): pure, no server."""

from __future__ import annotations

import multiprocessing

from celkeeper.webhook.balance import LoadBoard


def test_the_least_loaded_accepting_sibling_is_known() -> None:
    board = LoadBoard()
    a, b, c = board.claim(), board.claim(), board.claim()
    assert board.least_other(a) is None  # claimed but not accepting yet (loading): not counted
    board.publish(b, 3)
    board.publish(c, 1)
    assert board.least_other(a) == 1 and board.least_other(c) == 3
    board.publish(c, None)  # stopping, or full
    assert board.least_other(a) == 3
    board.release(b)
    assert board.least_other(a) is None
    assert board.claim() == b  # a released slot is claimed again


def _publish(board: LoadBoard, slot: int) -> None:
    board.publish(slot, 7)


def test_forked_workers_see_each_others_counts() -> None:
    board = LoadBoard()
    mine, theirs = board.claim(), board.claim()
    child = multiprocessing.get_context("fork").Process(target=_publish, args=(board, theirs))
    child.start()
    child.join()
    assert board.least_other(mine) == 7
