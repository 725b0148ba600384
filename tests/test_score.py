"""``atomistic score``: streaming, resumable batch scoring, locally and on a local Ray instance."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from ase.build import bulk
from typer.testing import CliRunner

from atomistic import load_potential
from atomistic.cli import app

ROOT = Path(__file__).resolve().parent.parent


def _write_inputs(path: Path, n: int, bad: tuple[int, ...] = ()) -> list[dict]:
    items = []
    for k in range(n):
        atoms = bulk("Si", "diamond", 5.43)
        atoms.rattle(0.05, seed=k)
        item = {"numbers": atoms.numbers.tolist(), "positions": atoms.positions.tolist(), "cell": atoms.cell.array.tolist(), "pbc": True}
        if k in bad:
            item["positions"][1] = [float("nan")] * 3
        items.append(item)
    path.write_text("".join(json.dumps(item) + "\n" for item in items))
    return items


def _records(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_score_local_matches_predict(tmp_path):
    items = _write_inputs(tmp_path / "in.jsonl", 7, bad=(3,))
    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["score", str(tmp_path / "in.jsonl"), "-o", str(out), "--model", "mlearn-small", "--chunk-size", "3", "--backend", "reference"])
    assert result.exit_code == 0, result.output
    records = _records(out)
    assert [r["index"] for r in records] == list(range(7)) and "error" in records[3] and "NaN" in records[3]["error"]
    expected = load_potential("mlearn-small").predict([items[k] for k in (0, 6)], properties=("energy", "forces"))
    for record, reference in zip((records[0], records[6]), expected, strict=True):
        assert abs(record["energy"] - reference["energy"]) < 1e-9
        np.testing.assert_allclose(record["forces"], reference["forces"], atol=1e-9)
    # a finished run is not silently overwritten by an unrelated one
    again = CliRunner().invoke(app, ["score", str(tmp_path / "in.jsonl"), "-o", str(out), "--model", "mlearn-small", "--properties", "energy"])
    assert again.exit_code == 2 and "another run" in again.output


def test_score_resumes_after_kill_9(tmp_path):
    n = 300
    _write_inputs(tmp_path / "in.jsonl", n)
    out = tmp_path / "out.jsonl"
    command = [sys.executable, "-m", "atomistic.cli", "score", str(tmp_path / "in.jsonl"), "-o", str(out), "--model", "mlearn-small", "--chunk-size", "4", "--properties", "energy", "--backend", "reference"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    state = out.with_name(out.name + ".progress.json")
    deadline = time.monotonic() + 120
    while not (state.exists() and json.loads(state.read_text())["progress"]["done"] >= 8):
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.01)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done_at_kill = json.loads(state.read_text())["progress"]["done"]
    assert done_at_kill < n
    finished = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
    assert finished.returncode == 0, finished.stderr
    assert [r["index"] for r in _records(out)] == list(range(n))  # every input exactly once


def test_score_with_ray_engine_equals_local(tmp_path):
    pytest.importorskip("ray")
    _write_inputs(tmp_path / "in.jsonl", 6, bad=(2,))
    common = ["--model", "mlearn-small", "--chunk-size", "2", "--backend", "reference"]
    local, distributed = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    assert CliRunner().invoke(app, ["score", str(tmp_path / "in.jsonl"), "-o", str(local), *common]).exit_code == 0
    result = subprocess.run(
        [sys.executable, "-m", "atomistic.cli", "score", str(tmp_path / "in.jsonl"), "-o", str(distributed), *common, "--engine", "ray", "--workers", "2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    for a, b in zip(_records(local), _records(distributed), strict=True):
        assert a["index"] == b["index"] and ("error" in a) == ("error" in b)
        if "energy" in a:
            assert abs(a["energy"] - b["energy"]) < 1e-9


class _FailsOnThreeAtomSystems:
    """Fault injection: the real potential, except that a call holding a three-atom structure
    raises, as an unforeseen failure of one structure would."""

    def __init__(self, potential):
        self._potential = potential

    def __getattr__(self, name):
        return getattr(self._potential, name)

    def predict(self, structures, **kwargs):
        if any(len(s) == 3 for s in structures):
            raise RuntimeError("injected failure")
        return self._potential.predict(structures, **kwargs)


def test_a_structure_that_fails_in_the_model_fails_alone_in_its_chunk():
    from atomistic.scoring import score_chunk

    potential = load_potential("mlearn-small")
    crystal = bulk("Si", "diamond", 5.43)
    three = {"numbers": [14, 14, 14], "positions": [[0, 0, 0], [2.3, 0, 0], [0, 2.3, 0]]}
    records = score_chunk(_FailsOnThreeAtomSystems(potential), [(0, crystal), (1, three), (2, crystal)], ("energy",))
    alone = potential.predict([crystal], properties=("energy",))[0]["energy"]
    assert [r["index"] for r in records] == [0, 1, 2]
    assert records[1]["error"] == "inference failed: RuntimeError: injected failure"
    assert records[0]["energy"] == pytest.approx(alone, abs=1e-9) and records[2]["energy"] == pytest.approx(alone, abs=1e-9)
