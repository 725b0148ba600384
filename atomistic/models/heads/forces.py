"""Forces and stress: the only derivative code in the project.

Both come from one backward pass of the total energy with respect to the positions and a
symmetric strain applied to positions and cell (the strain-displacement approach):

    r' = r (1 + ε),  cell' = cell (1 + ε),
    F = -∂E/∂r,  virial = -∂E/∂ε,  stress = (1/V) ∂E/∂ε   (ASE's sign: tensile > 0).
"""

from __future__ import annotations

import torch

from atomistic import keys
from atomistic.data.graph import AtomicGraph


def attach_strain(graph: AtomicGraph, with_forces: bool, with_stress: bool) -> tuple[AtomicGraph, torch.Tensor | None]:
    """Return a shallow copy of ``graph`` whose positions (and cell) depend on leaf tensors
    that the derivatives are taken against, and the strain leaf ``[n_systems, 3, 3]``."""
    graph = dict(graph)
    positions = graph[keys.POSITIONS]
    if with_forces or with_stress:
        positions = positions.detach().requires_grad_(True)
        graph[keys.POSITIONS] = positions
    strain = None
    if with_stress:
        cell = graph[keys.CELL]
        strain = torch.zeros_like(cell, requires_grad=True)
        symmetric = 0.5 * (strain + strain.transpose(-1, -2))
        graph[keys.POSITIONS] = positions + torch.einsum(
            "ai,aij->aj", positions, symmetric[graph[keys.SYSTEM_IDX]]
        )
        graph[keys.CELL] = cell + torch.bmm(cell, symmetric)
        graph["_leaf_positions"] = positions
    return graph, strain


def energy_derivatives(
    energy: torch.Tensor,
    graph: AtomicGraph,
    strain: torch.Tensor | None,
    with_forces: bool,
    with_stress: bool,
    create_graph: bool = False,
) -> dict[str, torch.Tensor]:
    """Forces ``[n_atoms, 3]`` eV/Å, virial and stress ``[n_systems, 3, 3]`` (eV, eV/Å³).

    ``graph`` must come from :func:`attach_strain`.  Stress is NaN for systems without a
    cell volume (non-periodic structures).
    """
    if not (with_forces or with_stress):
        return {}
    positions = graph.get("_leaf_positions", graph[keys.POSITIONS])
    inputs = [positions] + ([strain] if with_stress else [])
    grads = torch.autograd.grad(
        [energy.sum()], inputs, create_graph=create_graph, allow_unused=True
    )
    out: dict[str, torch.Tensor] = {}
    if with_forces:
        g = grads[0] if grads[0] is not None else torch.zeros_like(positions)
        out[keys.FORCES] = -g
    if with_stress:
        g = grads[-1] if grads[-1] is not None else torch.zeros_like(strain)
        cell = graph[keys.CELL].detach()
        volume = torch.linalg.det(cell).abs()
        volume = torch.where(volume > 1e-12, volume, torch.full_like(volume, float("nan")))
        out[keys.VIRIAL] = -g
        out[keys.STRESS] = g / volume[:, None, None]
    return out
