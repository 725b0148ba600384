"""scripts/loss_share.py: each training file's expected share of the force loss."""

import importlib.util

import numpy as np
import pytest

from tests.paths import ROOT

spec = importlib.util.spec_from_file_location("loss_share", ROOT / "scripts" / "loss_share.py")
loss_share = importlib.util.module_from_spec(spec)
spec.loader.exec_module(loss_share)


def two_files(weight_b: float):
    """3 structures of 15 atoms (file 0, weight 1) and 6 of 9 atoms (file 1, weight ``weight_b``)."""
    atoms = np.array([15.0] * 3 + [9.0] * 6)
    weight = np.array([1.0] * 3 + [weight_b] * 6)
    file = np.array([0] * 3 + [1] * 6)
    return atoms, weight, file


def test_one_structure_batches_count_each_structure_whole_or_by_its_weight():
    atoms, weight, file = two_files(0.25)
    # per batch, a lone structure is its batch's whole weighted mean: weights cancel
    shares = loss_share.force_loss_shares(atoms, weight, file, 1, "batch", epochs=1)
    np.testing.assert_allclose(shares, [3 / 9, 6 / 9])
    # over the dataset a structure counts by its weight: 3 x 1 against 6 x 0.25
    shares = loss_share.force_loss_shares(atoms, weight, file, 1, "dataset", epochs=1)
    np.testing.assert_allclose(shares, [3 / 4.5, 1.5 / 4.5])


def test_weights_act_more_over_the_dataset_than_within_batches():
    atoms, weight, file = two_files(0.25)
    by_batch = loss_share.force_loss_shares(atoms, weight, file, 3, "batch", epochs=300)
    by_dataset = loss_share.force_loss_shares(atoms, weight, file, 3, "dataset", epochs=300)
    assert by_batch.sum() == pytest.approx(1.0) and by_dataset.sum() == pytest.approx(1.0)
    assert by_dataset[0] > by_batch[0]
    # with equal weights the two normalisations are one (same seeded batches)
    atoms, weight, file = two_files(1.0)
    np.testing.assert_allclose(
        loss_share.force_loss_shares(atoms, weight, file, 3, "dataset", epochs=50),
        loss_share.force_loss_shares(atoms, weight, file, 3, "batch", epochs=50),
    )
    # and a file's share then is its mean share of a batch's atoms, not of all atoms: small batches
    # count each of their atoms more (here, the 9-atom structures')
    assert loss_share.force_loss_shares(atoms, weight, file, 3, "batch", epochs=300)[0] < 45 / 99
