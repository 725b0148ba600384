from __future__ import annotations

import importlib.util

from .paths import DATA, ROOT


def _load_script():
    spec = importlib.util.spec_from_file_location("bench_checkpoints", ROOT / "scripts" / "bench_checkpoints.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_bench_checkpoints_times_each_model_against_the_first(capsys):
    bench = _load_script()
    data = DATA / "botnet" / "acac" / "train_600K.xyz"
    rows = bench.main(["organic-compact", "organic", "--data", str(data), "--structures", "2", "--repeats", "1"])
    assert [row["checkpoint"] for row in rows] == ["organic-compact", "organic"]
    assert rows[0]["ratio"] == 1.0 and rows[1]["seconds"] > 0
    assert rows[1]["parameters"] > rows[0]["parameters"]
    assert "| organic | " in capsys.readouterr().out
