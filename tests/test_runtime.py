"""Failure isolation shared by the server's micro-batcher and batch scoring."""

from __future__ import annotations

from atomistic.runtime import each_alone


def _square_unless_negative(values: list[int]) -> list[int]:
    if any(v < 0 for v in values):
        raise ValueError(f"negative input in {values}")
    return [v * v for v in values]


def test_each_alone_gives_each_item_its_result_or_its_own_error():
    out = each_alone(_square_unless_negative, [3, -1, 2, -5])
    assert out[0] == 9 and out[2] == 4
    assert isinstance(out[1], ValueError) and "[-1]" in str(out[1])
    assert isinstance(out[3], ValueError) and "[-5]" in str(out[3])


def test_each_alone_calls_compute_once_per_item_with_that_item_alone():
    calls: list[list[str]] = []

    def record(items: list[str]) -> list[str]:
        calls.append(list(items))
        return [s.upper() for s in items]

    assert each_alone(record, ["a", "b"]) == ["A", "B"]
    assert calls == [["a"], ["b"]]
    assert each_alone(record, []) == []
