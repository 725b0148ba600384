"""The weighted loss: per-file weights (on every term or on one) normalised within each batch or over the training set."""

from __future__ import annotations

import pytest
import torch

from atomistic import keys
from atomistic.training.config import ConfigError, config_from_dict
from atomistic.training.losses import LossWeights, dataset_mean_weights, weighted_loss

DTYPE = torch.float64


def _structures(n_atoms: list[int], weights: list[float], seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """One labelled single-structure graph and its model outputs per entry; energy, forces and
    stress all labelled, predictions off by random amounts."""
    generator = torch.Generator().manual_seed(seed)
    pairs = []
    for n, w in zip(n_atoms, weights, strict=True):
        graph = {
            keys.POSITIONS: torch.zeros(n, 3, dtype=DTYPE),
            keys.SYSTEM_IDX: torch.zeros(n, dtype=torch.long),
            keys.N_ATOMS: torch.tensor([n]),
            "loss_weight": torch.tensor([w], dtype=DTYPE),
            "has_energy": torch.tensor([True]),
            "has_forces": torch.tensor([True]),
            "has_stress": torch.tensor([True]),
            "ref_energy": torch.randn(1, generator=generator, dtype=DTYPE),
            "ref_forces": torch.randn(n, 3, generator=generator, dtype=DTYPE),
            "ref_stress": torch.randn(1, 3, 3, generator=generator, dtype=DTYPE) * 0.01,
        }
        outputs = {
            keys.ENERGY: torch.randn(1, generator=generator, dtype=DTYPE),
            keys.FORCES: torch.randn(n, 3, generator=generator, dtype=DTYPE),
            keys.STRESS: torch.randn(1, 3, 3, generator=generator, dtype=DTYPE) * 0.01,
        }
        pairs.append((graph, outputs))
    return pairs


def _batch(pairs) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    graph: dict[str, torch.Tensor] = {}
    outputs: dict[str, torch.Tensor] = {}
    for index, (g, o) in enumerate(pairs):
        for key, value in g.items():
            value = torch.full_like(value, index) if key == keys.SYSTEM_IDX else value
            graph[key] = torch.cat([graph[key], value]) if key in graph else value
        for key, value in o.items():
            outputs[key] = torch.cat([outputs[key], value]) if key in outputs else value
    return graph, outputs


def _terms(pairs, weights: LossWeights, mean_weights=None) -> dict[str, float]:
    graph, outputs = _batch(pairs)
    return {k: float(v) for k, v in weighted_loss(outputs, graph, weights, mean_weights=mean_weights).items()}


def test_batch_normalisation_ignores_the_weight_of_a_batch_from_one_file():
    pairs = _structures([3, 5], [1.0, 1.0])
    heavy = [({**g, "loss_weight": g["loss_weight"] * 40}, o) for g, o in pairs]
    light, weighted = _terms(pairs, LossWeights()), _terms(heavy, LossWeights())
    for name in ("energy", "forces", "stress", "total"):
        assert weighted[name] == pytest.approx(light[name], rel=1e-12)


def test_dataset_normalisation_scales_a_batch_by_its_weight():
    pairs = _structures([3, 5], [1.0, 1.0])
    heavy = [({**g, "loss_weight": g["loss_weight"] * 4}, o) for g, o in pairs]
    means = {"energy": 2.0, "forces": 2.0, "stress": 2.0}
    by_dataset = LossWeights(weight_normalisation="dataset")
    plain, weighted = _terms(pairs, LossWeights()), _terms(heavy, by_dataset, means)
    for name in ("energy", "forces", "stress", "total"):
        assert weighted[name] == pytest.approx(2.0 * plain[name], rel=1e-12)


def test_dataset_normalisation_averages_batches_to_the_dataset_weighted_mean():
    # six structures of four atoms each, weights as two files would give them; any split into
    # batches of equal size averages to the weighted mean over the whole set
    n_atoms, file_weights = [4] * 6, [9.0, 9.0, 1.0, 1.0, 1.0, 1.0]
    pairs = _structures(n_atoms, file_weights, seed=3)
    graphs = [g for g, _ in pairs]
    means = dataset_mean_weights(graphs)
    by_dataset = LossWeights(weight_normalisation="dataset")
    whole_set = _terms(pairs, LossWeights())  # batch normalisation over all six = the weighted mean
    for order in ([0, 1, 2, 3, 4, 5], [0, 2, 1, 3, 4, 5], [5, 0, 4, 1, 3, 2]):
        batches = [[pairs[i] for i in order[k : k + 2]] for k in range(0, 6, 2)]
        mean_of_batches = {
            name: sum(_terms(b, by_dataset, means)[name] for b in batches) / len(batches)
            for name in ("energy", "forces", "stress")
        }
        for name, value in mean_of_batches.items():
            assert value == pytest.approx(whole_set[name], rel=1e-12), (order, name)


def test_dataset_mean_weights_count_labelled_items_and_weight_forces_by_atoms():
    pairs = _structures([2, 6, 4], [3.0, 1.0, 5.0])
    graphs = [g for g, _ in pairs]
    graphs[2] = {**graphs[2], "has_energy": torch.tensor([False]), "has_stress": torch.tensor([False])}
    means = dataset_mean_weights(graphs)
    assert means["energy"] == pytest.approx((3.0 + 1.0) / 2)
    assert means["stress"] == pytest.approx((3.0 + 1.0) / 2)
    assert means["forces"] == pytest.approx((3.0 * 2 + 1.0 * 6 + 5.0 * 4) / 12)
    unlabelled = [{**g, "has_forces": torch.tensor([False])} for g in graphs]
    assert dataset_mean_weights(unlabelled)["forces"] == 1.0


def test_unknown_or_incomplete_normalisation_is_refused():
    graph, outputs = _batch(_structures([3], [1.0]))
    with pytest.raises(ValueError, match="weight_normalisation 'per_atom'"):
        weighted_loss(outputs, graph, LossWeights(weight_normalisation="per_atom"))
    with pytest.raises(ValueError, match="needs the training set's mean_weights"):
        weighted_loss(outputs, graph, LossWeights(weight_normalisation="dataset"))
    with pytest.raises(ConfigError, match="loss.weight_normalisation: must be batch or dataset"):
        config_from_dict({"data": {"train": ["a.json"]}, "loss": {"weight_normalisation": "global"}})
    config = config_from_dict({"data": {"train": ["a.json"]}, "loss": {"weight_normalisation": "dataset"}})
    assert config.loss.weight_normalisation == "dataset"


def test_a_term_weight_replaces_the_file_weight_on_that_term_only():
    pairs = _structures([3, 5, 4], [1.0, 1.0, 1.0], seed=5)
    # the middle structure's file weighs 4 on every term but energy, where it weighs 0.5
    reweighted = [
        ({**g, "loss_weight": g["loss_weight"] * w, "loss_weight_energy": g["loss_weight"] * e}, o)
        for (g, o), w, e in zip(pairs, [1.0, 4.0, 1.0], [1.0, 0.5, 1.0], strict=True)
    ]
    every_term = [({**g, "loss_weight": g["loss_weight"] * w}, o) for (g, o), w in zip(pairs, [1.0, 4.0, 1.0], strict=True)]
    energy_only = [({**g, "loss_weight": g["loss_weight"] * e}, o) for (g, o), e in zip(pairs, [1.0, 0.5, 1.0], strict=True)]
    for normalisation in ("batch", "dataset"):
        weights = LossWeights(weight_normalisation=normalisation)
        means = {name: 1.0 for name in ("energy", "forces", "stress")}
        mixed = _terms(reweighted, weights, means)
        assert mixed["energy"] == pytest.approx(_terms(energy_only, weights, means)["energy"], rel=1e-12)
        for name in ("forces", "stress"):
            assert mixed[name] == pytest.approx(_terms(every_term, weights, means)[name], rel=1e-12)
        assert mixed["energy"] != pytest.approx(_terms(every_term, weights, means)["energy"], rel=1e-3)


def test_dataset_mean_weights_use_each_terms_own_weight():
    pairs = _structures([2, 6], [3.0, 1.0])
    graphs = [g for g, _ in pairs]
    graphs[0] = {**graphs[0], "loss_weight_energy": torch.tensor([7.0], dtype=DTYPE), "loss_weight_forces": torch.tensor([2.0], dtype=DTYPE)}
    means = dataset_mean_weights(graphs)
    assert means["energy"] == pytest.approx((7.0 + 1.0) / 2)
    assert means["forces"] == pytest.approx((2.0 * 2 + 1.0 * 6) / 8)
    assert means["stress"] == pytest.approx((3.0 + 1.0) / 2)  # no stress weight: the file weight


def test_term_weights_in_the_config_default_to_the_file_weight_and_must_not_be_negative():
    config = config_from_dict({"data": {"train": [{"path": "a.json", "weight": 3.0, "energy_weight": 0.5}]}})
    assert config.data.train[0].term_weights() == {"energy": 0.5, "forces": 3.0, "stress": 3.0}
    with pytest.raises(ConfigError, match=r"data.train\[1\].forces_weight: must be null or >= 0"):
        config_from_dict({"data": {"train": ["a.json", {"path": "b.json", "forces_weight": -1.0}]}})
    with pytest.raises(ConfigError, match=r"data.train\[0\].energy_weight: expected float"):
        config_from_dict({"data": {"train": [{"path": "a.json", "energy_weight": "heavy"}]}})
