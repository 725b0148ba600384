"""The interfaces every kernel backend implements."""

from __future__ import annotations

import torch
from e3nn import o3

from atomistic.kernels.spec import ConvolutionSpec, SymmetricContractionSpec


class TensorProductConvolution(torch.nn.Module):
    """Gather → channel-wise tensor product → scatter-sum, as one operation.

    Subclasses hold no trainable parameters; the weights arrive per edge.

    Forward:
        node_features: ``[n_nodes, irreps_node.dim]``
        edge_attrs: ``[n_edges, irreps_edge.dim]`` (spherical harmonics of the edge vectors)
        edge_weights: ``[n_edges, spec.weight_numel]`` (from the radial network)
        centre, neighbour: ``[n_edges]`` int64; messages flow neighbour → centre
    Returns:
        ``[n_nodes, irreps_out.dim]``, the sum of messages arriving at each node (unnormalised).
    """

    backend_name: str = "abstract"

    def __init__(self, spec: ConvolutionSpec):
        super().__init__()
        self.spec = spec
        self.irreps_in = spec.irreps_node
        self.irreps_out = spec.irreps_out

    def forward(
        self,
        node_features: torch.Tensor,
        edge_attrs: torch.Tensor,
        edge_weights: torch.Tensor,
        centre: torch.Tensor,
        neighbour: torch.Tensor,
    ) -> torch.Tensor:  # pragma: no cover - interface
        raise NotImplementedError


class SymmetricContraction(torch.nn.Module):
    """The product basis without its parameters: the weights arrive as arguments.

    Forward:
        atomic_basis: ``[n_atoms, irreps_in.dim]``
        species: ``[n_atoms]`` int64 species index
        weights: one tensor per correlation order, ``[num_species, num_paths(ν), channels]``
    Returns:
        ``[n_atoms, irreps_out.dim]``
    """

    backend_name: str = "abstract"

    def __init__(self, spec: SymmetricContractionSpec):
        super().__init__()
        self.spec = spec
        self.irreps_in = o3.Irreps(spec.irreps_in)
        self.irreps_out = o3.Irreps(spec.irreps_out)

    def forward(
        self, atomic_basis: torch.Tensor, species: torch.Tensor, weights: list[torch.Tensor]
    ) -> torch.Tensor:  # pragma: no cover - interface
        raise NotImplementedError
