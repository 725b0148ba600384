"""MACE-class interaction: channel-wise tensor-product convolution weighted by a radial MLP."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from e3nn import o3
from e3nn.nn import FullyConnectedNet

from atomistic.kernels import ConvolutionSpec, make_convolution, make_linear


class Interaction(torch.nn.Module):
    """Messages ``A_i = Linear( Σ_j R(r_ij) · (Linear(h)_j ⊗ Y(r̂_ij)) / avg_num_neighbors )``.

    Args:
        irreps_in: node features ``h``.
        irreps_edge: spherical harmonics ``Y``.
        irreps_out: the atomic basis ``A`` (typically ``C x (0e + 1o + ... + max_ell)``).
        num_radial: size of the radial embedding.
        radial_hidden: hidden widths of the radial MLP.
        avg_num_neighbors: normalisation of the neighbour sum.
        backend: tensor-product backend name.
        radial_variance: mean square of the radial embedding (normalises the radial MLP).

    Forward:
        node_features ``[n_atoms, irreps_in.dim]``, edge_attrs ``[n_edges, irreps_edge.dim]``,
        edge_radial ``[n_edges, num_radial]``, centre/neighbour ``[n_edges]``
        → ``[n_atoms, irreps_out.dim]``
    """

    def __init__(
        self,
        irreps_in: o3.Irreps,
        irreps_edge: o3.Irreps,
        irreps_out: o3.Irreps,
        num_radial: int,
        radial_hidden: Sequence[int],
        avg_num_neighbors: float,
        backend: str = "reference",
        radial_variance: float = 1.0,
    ):
        super().__init__()
        self.irreps_in = o3.Irreps(irreps_in)
        self.irreps_out = o3.Irreps(irreps_out)
        self.avg_num_neighbors = float(avg_num_neighbors)
        self.linear_in = make_linear(self.irreps_in, self.irreps_in, backend)
        self.spec = ConvolutionSpec(
            irreps_node=str(self.irreps_in),
            irreps_edge=str(o3.Irreps(irreps_edge)),
            lmax_out=self.irreps_out.lmax,
            parity_out=tuple(sorted({ir.p for _, ir in self.irreps_out})),
        )
        self.convolution = make_convolution(self.spec, backend)
        self.radial_mlp = FullyConnectedNet(
            [num_radial, *radial_hidden, self.spec.weight_numel],
            torch.nn.functional.silu,
            variance_in=radial_variance,
        )
        self.linear_out = make_linear(self.spec.irreps_out, self.irreps_out, backend)

    def forward(self, node_features, edge_attrs, edge_radial, centre, neighbour):
        h = self.linear_in(node_features)
        weights = self.radial_mlp(edge_radial)
        messages = self.convolution(h, edge_attrs, weights, centre, neighbour)
        return self.linear_out(messages / self.avg_num_neighbors)
