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
    kind: str = "mse"  # "huber" or "mse"
    huber_delta: float = 0.01


def _elementwise(pred: torch.Tensor, ref: torch.Tensor, weights: LossWeights) -> torch.Tensor:
    if weights.kind == "mse":
        return (pred - ref) ** 2
    if weights.kind == "huber":
        return torch.nn.functional.huber_loss(pred, ref, reduction="none", delta=weights.huber_delta)
    raise ValueError(f"unknown loss kind '{weights.kind}'; use 'huber' or 'mse'")


STRESS_UNIT = 0.01  # eV/Å³ (~1.6 GPa): stress residuals are measured in this unit


def weighted_loss(outputs: dict[str, torch.Tensor], graph: dict[str, torch.Tensor], weights: LossWeights) -> dict[str, torch.Tensor]:
    """Loss terms and their weighted sum, ``{"energy", "forces", "stress", "total"}``."""
    n_atoms = graph[keys.N_ATOMS].to(outputs[keys.ENERGY].dtype)
    # per-structure weights (per-file loss weights); weighted means over the labelled items
    system_weight = graph.get("loss_weight", torch.ones_like(n_atoms)).to(n_atoms.dtype)
    terms: dict[str, torch.Tensor] = {}
    has_e = graph["has_energy"]
    if weights.energy > 0 and has_e.any():
        e_pred = outputs[keys.ENERGY][has_e] / n_atoms[has_e]
        e_ref = graph["ref_energy"][has_e] / n_atoms[has_e]
        w = system_weight[has_e]
        terms["energy"] = (_elementwise(e_pred, e_ref, weights) * w).sum() / w.sum().clamp_min(1e-12)
    if weights.forces > 0 and keys.FORCES in outputs:
        atom_has = graph["has_forces"][graph[keys.SYSTEM_IDX]]
        if atom_has.any():
            w = system_weight[graph[keys.SYSTEM_IDX]][atom_has][:, None]
            per_component = _elementwise(outputs[keys.FORCES][atom_has], graph["ref_forces"][atom_has], weights)
            terms["forces"] = (per_component * w).sum() / (3 * w.sum()).clamp_min(1e-12)
    if weights.stress > 0 and keys.STRESS in outputs:
        has_s = graph["has_stress"] & torch.isfinite(outputs[keys.STRESS]).all(dim=(1, 2))
        if has_s.any():
            w = system_weight[has_s][:, None, None]
            per_component = _elementwise(
                outputs[keys.STRESS][has_s] / STRESS_UNIT, graph["ref_stress"][has_s] / STRESS_UNIT, weights
            )
            terms["stress"] = (per_component * w).sum() / (9 * w.sum()).clamp_min(1e-12)
    total = sum(getattr(weights, k) * v for k, v in terms.items())
    terms["total"] = total if isinstance(total, torch.Tensor) else torch.zeros(())
    return terms
