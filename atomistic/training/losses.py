"""Weighted energy-per-atom / forces / stress loss."""

from __future__ import annotations

import dataclasses

import torch

from atomistic import keys


@dataclasses.dataclass(frozen=True)
class LossWeights:
    energy: float = 10.0  # on energy per atom, eV/atom
    forces: float = 1.0  # on force components, eV/Å
    stress: float = 0.05  # on stress components, in units of STRESS_UNIT (0.01 eV/Å³)
    tensors: float = 1.0  # on each crystal tensor's components, in units of its head's data scale
    kind: str = "mse"  # "huber" or "mse"
    huber_delta: float = 0.01
    # How per-structure loss weights are normalised: "batch" divides each term by the batch's
    # summed weight (a weighted mean within the batch: a batch from one file counts in full
    # whatever its weight); "dataset" divides by the batch's item count times the training
    # set's mean weight, so a batch's contribution scales with its own weights and the
    # expected loss is the dataset-wide weighted mean (weights rebalance files or elements).
    weight_normalisation: str = "batch"


def _elementwise(pred: torch.Tensor, ref: torch.Tensor, weights: LossWeights) -> torch.Tensor:
    if weights.kind == "mse":
        return (pred - ref) ** 2
    if weights.kind == "huber":
        return torch.nn.functional.huber_loss(pred, ref, reduction="none", delta=weights.huber_delta)
    raise ValueError(f"unknown loss kind '{weights.kind}'; use 'huber' or 'mse'")


STRESS_UNIT = 0.01  # eV/Å³ (~1.6 GPa): stress residuals are measured in this unit

WEIGHT_NORMALISATIONS = ("batch", "dataset")

# Loss terms that a training file may weight on their own (``energy_weight`` …); a graph
# carries each as ``loss_weight_<term>`` [n_systems], falling back on ``loss_weight``.
TERM_WEIGHT_NAMES = ("energy", "forces", "stress")


def term_weight(graph: dict[str, torch.Tensor], term: str) -> torch.Tensor | None:
    """Per-structure loss weight of one term, ``[n_systems]``: ``loss_weight_<term>`` where the
    graph has it, else ``loss_weight``, else None (weight 1)."""
    return graph.get(f"loss_weight_{term}", graph.get("loss_weight"))


def dataset_mean_weights(graphs, tensor_keys=()) -> dict[str, float]:
    """Mean per-structure loss weight over the labelled items of a training set, per loss term:
    ``energy`` and ``stress`` over the structures that carry the label, ``forces`` over the
    atoms that do (atom-weighted), and each crystal-tensor key over its labelled structures.
    ``graphs`` are single-structure graphs with ``loss_weight`` (default 1) and optionally
    ``loss_weight_<term>`` (see :func:`term_weight`). A term with no labelled item gets 1.
    These are the denominators of ``weight_normalisation: dataset``."""
    sums = {name: [0.0, 0.0] for name in (*TERM_WEIGHT_NAMES, *tensor_keys)}
    for graph in graphs:
        n_atoms = int(graph[keys.N_ATOMS][0])
        for name, label, count in (("energy", "has_energy", 1), ("forces", "has_forces", n_atoms), ("stress", "has_stress", 1)):
            if bool(graph[label][0]):
                weight = term_weight(graph, name)
                sums[name][0] += (1.0 if weight is None else float(weight[0])) * count
                sums[name][1] += count
        weight = float(graph["loss_weight"][0]) if "loss_weight" in graph else 1.0
        for key in tensor_keys:
            has = graph.get(f"has_{key}")
            if has is not None and bool(has[0]):
                sums[key][0] += weight
                sums[key][1] += 1
    return {name: (total / count if count else 1.0) for name, (total, count) in sums.items()}


def weighted_loss(
    outputs: dict[str, torch.Tensor],
    graph: dict[str, torch.Tensor],
    weights: LossWeights,
    tensor_scales: dict[str, float] | None = None,
    mean_weights: dict[str, float] | None = None,
) -> dict[str, torch.Tensor]:
    """Loss terms and their weighted sum, ``{"energy", "forces", "stress", <tensor keys>, "total"}``.

    Crystal-tensor residuals are measured in units of ``tensor_scales[key]`` (the head's data
    scale: GPa, C/m², unitless) and weighted by ``weights.tensors``. With
    ``weights.weight_normalisation == "dataset"``, ``mean_weights`` (from
    :func:`dataset_mean_weights` on the training set) replaces each batch's summed weight in
    the denominators."""
    if weights.weight_normalisation not in WEIGHT_NORMALISATIONS:
        raise ValueError(
            f"unknown weight_normalisation '{weights.weight_normalisation}'; use one of {', '.join(WEIGHT_NORMALISATIONS)}"
        )
    by_dataset = weights.weight_normalisation == "dataset"
    if by_dataset and mean_weights is None:
        raise ValueError("weight_normalisation 'dataset' needs the training set's mean_weights")
    n_atoms = graph[keys.N_ATOMS].to(graph[keys.POSITIONS].dtype)

    def system_weight(term: str | None = None) -> torch.Tensor:
        """Per-structure weights ``[n_systems]`` (per-file loss weights) of a term, or the
        file weight itself (``term=None``: crystal tensors)."""
        weight = graph.get("loss_weight") if term is None else term_weight(graph, term)
        return torch.ones_like(n_atoms) if weight is None else weight.to(n_atoms.dtype)

    def normaliser(name: str, w: torch.Tensor) -> torch.Tensor:
        """Denominator of a weighted sum over the labelled items with weights ``w``."""
        if by_dataset:
            return torch.as_tensor(w.shape[0] * mean_weights.get(name, 1.0), dtype=w.dtype, device=w.device)
        return w.sum().clamp_min(1e-12)

    terms: dict[str, torch.Tensor] = {}
    has_e = graph["has_energy"]
    if weights.energy > 0 and keys.ENERGY in outputs and has_e.any():
        e_pred = outputs[keys.ENERGY][has_e] / n_atoms[has_e]
        e_ref = graph["ref_energy"][has_e] / n_atoms[has_e]
        w = system_weight("energy")[has_e]
        terms["energy"] = (_elementwise(e_pred, e_ref, weights) * w).sum() / normaliser("energy", w)
    if weights.forces > 0 and keys.FORCES in outputs:
        atom_has = graph["has_forces"][graph[keys.SYSTEM_IDX]]
        if atom_has.any():
            w = system_weight("forces")[graph[keys.SYSTEM_IDX]][atom_has][:, None]
            per_component = _elementwise(outputs[keys.FORCES][atom_has], graph["ref_forces"][atom_has], weights)
            terms["forces"] = (per_component * w).sum() / (3 * normaliser("forces", w))
    if weights.stress > 0 and keys.STRESS in outputs:
        has_s = graph["has_stress"] & torch.isfinite(outputs[keys.STRESS]).all(dim=(1, 2))
        if has_s.any():
            w = system_weight("stress")[has_s][:, None, None]
            per_component = _elementwise(
                outputs[keys.STRESS][has_s] / STRESS_UNIT, graph["ref_stress"][has_s] / STRESS_UNIT, weights
            )
            terms["stress"] = (per_component * w).sum() / (9 * normaliser("stress", w))
    for key, scale in (tensor_scales or {}).items():
        has_t = graph.get(f"has_{key}")
        if weights.tensors > 0 and key in outputs and has_t is not None and has_t.any():
            w = system_weight()[has_t]
            per_system = _elementwise(outputs[key][has_t] / scale, graph[f"ref_{key}"][has_t] / scale, weights)
            per_system = per_system.reshape(per_system.shape[0], -1).mean(dim=1)
            terms[key] = (per_system * w).sum() / normaliser(key, w)
    total = sum((weights.tensors if k in keys.TENSOR_KEYS else getattr(weights, k)) * v for k, v in terms.items())
    terms["total"] = total if isinstance(total, torch.Tensor) else torch.zeros(())
    return terms
