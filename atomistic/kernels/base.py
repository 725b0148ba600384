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


def transpose_derivative(convolve, transpose, g, h, y, w, a_h, a_y, a_w):
    """Derivative of the vector–Jacobian product ``(T_h*, T_Y*, T_w*)(g)`` of a convolution
    ``T(h, Y, w)`` for upstream gradients ``(a_h, a_Y, a_w)``; the double backward of the fused
    kernels (a force loss differentiates their backward).

    ``T`` is linear in each of ``h``, ``Y``, ``w``, so the derivatives of its transposes are
    the same two operations at swapped arguments:

        ∂/∂g = T(a_h, Y, w) + T(h, a_Y, w) + T(h, Y, a_w)
        ∂/∂h = T_h*(g; a_Y, w) + T_h*(g; Y, a_w)
        ∂/∂Y = T_Y*(g; a_h, w) + T_Y*(g; h, a_w)
        ∂/∂w = T_w*(g; a_h, Y) + T_w*(g; h, a_Y)

    ``convolve(h, y, w)`` computes ``T``; ``transpose(g, h, y, w, need)`` the three products,
    of which only those flagged in ``need`` (three bools) are used.  An upstream gradient that
    is None contributes nothing.  Returns ``(grad_g, grad_h, grad_y, grad_w)``, None where no
    term contributes.
    """

    def add(total, term):
        return term if total is None else total + term

    grad_g = grad_h = grad_y = grad_w = None
    if a_h is not None:
        grad_g = add(grad_g, convolve(a_h, y, w))
        _, d_y, d_w = transpose(g, a_h, y, w, (False, True, True))
        grad_y, grad_w = add(grad_y, d_y), add(grad_w, d_w)
    if a_y is not None:
        grad_g = add(grad_g, convolve(h, a_y, w))
        d_h, _, d_w = transpose(g, h, a_y, w, (True, False, True))
        grad_h, grad_w = add(grad_h, d_h), add(grad_w, d_w)
    if a_w is not None:
        grad_g = add(grad_g, convolve(h, y, a_w))
        d_h, d_y, _ = transpose(g, h, y, a_w, (True, True, False))
        grad_h, grad_y = add(grad_h, d_h), add(grad_y, d_y)
    return grad_g, grad_h, grad_y, grad_w


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
