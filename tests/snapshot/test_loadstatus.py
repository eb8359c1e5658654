"""Worker statuses (celkeeper.snapshot.loadstatus): the generation every worker has loaded."""

from __future__ import annotations

from pathlib import Path

from celkeeper.snapshot import (
    WorkerBoard,
    WorkerStatus,
)


def test_worker_board_reports_the_generation_all_workers_loaded(tmp_path: Path) -> None:
    board = WorkerBoard(tmp_path)
    assert board.loaded_generation() is None
    board.write(WorkerStatus(pid=10, generation=4, ready=True))
    board.write(WorkerStatus(pid=11, generation=0))
    assert board.loaded_generation() == 0
    board.write(WorkerStatus(pid=11, generation=5, ready=True))
    assert board.loaded_generation() == 4
    board.remove(10)
    assert board.loaded_generation() == 5
    assert [s.pid for s in board.read_all()] == [11]
