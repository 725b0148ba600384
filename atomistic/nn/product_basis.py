"""Product basis: species-weighted symmetric products of the atomic basis up to a
correlation order (the many-body step of MACE).

For correlation order ``ν`` the features are channel-wise products
``A ⊗ A ⊗ ... ⊗ A`` (``ν`` factors, coupled left to right with Clebsch–Gordan
coefficients), each coupling path weighted per species and channel:

    B_i^{(K)} = Σ_ν Σ_{paths → K} w_{z_i, path, c} · (A_i ⊗ ... ⊗ A_i)_{path, c}

Only ``l1 <= l2`` pairs are formed at second order, so identical symmetric couplings are not
duplicated.  A zero atomic basis gives zero output (no constant term), which keeps the
energy of an isolated atom equal to its reference energy.  The contraction itself runs on
the kernel backend (:func:`atomistic.kernels.make_symmetric_contraction`); this module holds
the weights.
"""

from __future__ import annotations

import torch
from e3nn import o3

from atomistic.kernels import (
    DEFAULT_BACKEND,
    SymmetricContractionSpec,
    make_linear,
    make_symmetric_contraction,
)


class SpeciesPathWeights(torch.nn.Module):
    """The weights of one correlation order: ``weights [num_species, num_paths, channels]``."""

    def __init__(self, num_species: int, num_paths: int, channels: int):
        super().__init__()
        self.weights = torch.nn.Parameter(torch.randn(num_species, num_paths, channels))


class ProductBasis(torch.nn.Module):
    """``A [n_atoms, irreps_in.dim]`` → ``B [n_atoms, irreps_out.dim]`` (then a linear map).

    Args:
        irreps_in: atomic basis, every irrep with the same multiplicity ``C``.
        irreps_out: target node irreps (all multiplicities ``C``).
        correlation: body order of the products, 1 to 3.
        num_species: number of species (for species-wise weights).
        backend: kernel backend of the contraction.
    """

    def __init__(
        self, irreps_in: o3.Irreps, irreps_out: o3.Irreps, correlation: int, num_species: int, backend: str = DEFAULT_BACKEND
    ):
        super().__init__()
        self.irreps_in = o3.Irreps(irreps_in)
        self.irreps_out = o3.Irreps(irreps_out)
        self.correlation = correlation
        self.spec = SymmetricContractionSpec(str(self.irreps_in), str(self.irreps_out), correlation)
        channels = self.spec.channels
        # weigh1..weigh3: the parameter names of saved checkpoints
        for order in range(1, correlation + 1):
            setattr(self, f"weigh{order}", SpeciesPathWeights(num_species, self.spec.num_paths(order), channels))
        self.contraction = make_symmetric_contraction(self.spec, backend)
        self.linear = make_linear(self.irreps_out, self.irreps_out, backend)

    def forward(self, atomic_basis: torch.Tensor, species: torch.Tensor) -> torch.Tensor:
        weights = [getattr(self, f"weigh{order}").weights for order in range(1, self.correlation + 1)]
        return self.linear(self.contraction(atomic_basis, species, weights))
