"""The interface every tensor-product convolution backend implements."""

from __future__ import annotations

import torch

from atomistic.kernels.spec import ConvolutionSpec


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
