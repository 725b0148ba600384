"""scripts/worst_structures.py: per-structure weighted training loss, worst first."""

import dataclasses
import importlib.util

import numpy as np
import pytest

from atomistic.data.datasets import read_mlearn_json
from atomistic.training.losses import LossWeights
from tests.conftest import small_mace
from tests.paths import DATA, ROOT

spec = importlib.util.spec_from_file_location("worst_structures", ROOT / "scripts" / "worst_structures.py")
worst_structures = importlib.util.module_from_spec(spec)
spec.loader.exec_module(worst_structures)


def test_weighted_terms_add_up_and_a_corrupted_label_ranks_first():
    structures = read_mlearn_json(DATA / "mlearn" / "Si" / "training.json")[:4]
    bad = structures[2]
    stress = bad.labels["stress"].copy()
    stress[0, 1] = stress[1, 0] = stress[0, 1] + 0.5  # 80 GPa of shear stress that is not there
    structures[2] = dataclasses.replace(bad, labels={**bad.labels, "stress": stress})
    weights = LossWeights(energy=50.0, forces=1.0, stress=0.05)
    rows = worst_structures.structure_losses(small_mace(), structures, weights)
    for row in rows:
        assert row["total"] == pytest.approx(row["energy"] + row["forces"] + row["stress"], rel=1e-9)
    assert int(np.argmax([r["total"] for r in rows])) == 2
    assert rows[2]["stress"] > max(r["stress"] for i, r in enumerate(rows) if i != 2)
