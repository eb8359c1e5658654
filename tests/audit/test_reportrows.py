"""A run's results kept on disk for the reports: every row back, by namespace and by bucket as
openreports.split would cut them in memory; the file gone at close; in memory without a temporary folder."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from celkeeper.audit.openreports import ResultRow, bucket_count, pieces, split
from celkeeper.audit.reportrows import ReportRows


def rows(namespace: str, count: int) -> list[ResultRow]:
    return [
        ResultRow(namespace, "v1", "Pod", f"p-{i}", f"u-{i}", "K/c", "k", "fail", f"m{i % 7}", "deny", "")
        for i in range(count)
    ]


def test_rows_come_back_by_namespace_and_bucket_as_split_cuts_them() -> None:
    given = {"a": rows("a", 2500), "b": rows("b", 3), "": rows("", 1)}
    with ReportRows.temporary() as store:
        assert store.path is not None and store.path.exists()
        for namespace_rows in given.values():
            for r in namespace_rows:
                store.add(r)
        assert store.total == 2504
        assert store.namespaces() == ["", "a", "b"]
        assert Counter(store) == Counter(r for rs in given.values() for r in rs)
        for namespace, expected in given.items():
            counts = store.counts(namespace)
            buckets = bucket_count(counts, 500)
            found = [
                p
                for b in sorted({h & (buckets - 1) for h in counts})
                for p in pieces(store.bucket(namespace, buckets, b), b, buckets, 500)
            ]
            assert [(p.name, p.rows) for p in found] == [(p.name, p.rows) for p in split(expected, 500)]
        folder = store.path.parent
    assert not folder.exists()


def test_without_a_temporary_folder_the_rows_are_kept_in_memory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "read-only-root" / "tmp"))
    with ReportRows.temporary() as store:
        assert store.path is None
        store.add(rows("a", 1)[0])
        assert store.namespaces() == ["a"]
    assert "kept in memory" in caplog.text
