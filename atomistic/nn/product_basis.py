"""Product basis: species-weighted symmetric products of the atomic basis up to a
correlation order (the many-body step of MACE).

For correlation order ``ν`` the features are channel-wise products
``A ⊗ A ⊗ ... ⊗ A`` (``ν`` factors, coupled left to right with Clebsch–Gordan
coefficients), each coupling path weighted per species and channel:

    B_i^{(K)} = Σ_ν Σ_{paths → K} w_{z_i, path, c} · (A_i ⊗ ... ⊗ A_i)_{path, c}

Only ``l1 <= l2`` pairs are formed at second order, so identical symmetric couplings are not
duplicated.  A zero atomic basis gives zero output (no constant term), which keeps the
energy of an isolated atom equal to its reference energy.
"""

from __future__ import annotations

import torch
from e3nn import o3


def _uuu_paths(irreps1: o3.Irreps, irreps2: o3.Irreps, allowed: set[o3.Irrep], symmetric: bool):
    paths, irreps_out = [], []
    for i1, (mul1, ir1) in enumerate(irreps1):
        for i2, (mul2, ir2) in enumerate(irreps2):
            if symmetric and i2 < i1:
                continue
            assert mul1 == mul2
            for ir_out in ir1 * ir2:
                if ir_out in allowed:
                    paths.append((i1, i2, len(irreps_out), "uuu", False))
                    irreps_out.append((mul1, ir_out))
    return paths, o3.Irreps(irreps_out)


class SpeciesWeightedSum(torch.nn.Module):
    """Weights each path block per species and channel and sums paths into target irreps.

    Forward: ``x [n_atoms, irreps_paths.dim]``, ``species [n_atoms]`` → ``[n_atoms, irreps_out.dim]``.
    """

    def __init__(self, irreps_paths: o3.Irreps, irreps_out: o3.Irreps, num_species: int, channels: int):
        super().__init__()
        self.irreps_paths = irreps_paths
        self.irreps_out = irreps_out
        self.channels = channels
        groups = []
        for _, ir in irreps_out:
            groups.append([k for k, (_, ir_p) in enumerate(irreps_paths) if ir_p == ir])
        self.groups = groups
        n_paths = len(irreps_paths)
        self.weights = torch.nn.Parameter(torch.randn(num_species, n_paths, channels))
        self._path_slices = irreps_paths.slices()
        self._fan_in = [max(len(g), 1) for g in groups]

    def forward(self, x: torch.Tensor, species: torch.Tensor) -> torch.Tensor:
        w = self.weights[species]  # [n_atoms, n_paths, channels]
        outputs = []
        for (mul, ir), group, fan_in in zip(self.irreps_out, self.groups, self._fan_in, strict=True):
            if not group:
                outputs.append(x.new_zeros(x.shape[0], mul * ir.dim))
                continue
            blocks = torch.stack(
                [x[:, self._path_slices[k]].reshape(-1, self.channels, ir.dim) for k in group], dim=1
            )  # [n_atoms, n_group, channels, 2l+1]
            summed = (blocks * w[:, group, :, None]).sum(dim=1) / fan_in**0.5
            outputs.append(summed.reshape(-1, mul * ir.dim))
        return torch.cat(outputs, dim=-1)


class ProductBasis(torch.nn.Module):
    """``A [n_atoms, irreps_in.dim]`` → ``B [n_atoms, irreps_out.dim]`` (then a linear map).

    Args:
        irreps_in: atomic basis, every irrep with the same multiplicity ``C``.
        irreps_out: target node irreps (all multiplicities ``C``).
        correlation: body order of the products, 1 to 3.
        num_species: number of species (for species-wise weights).
    """

    def __init__(self, irreps_in: o3.Irreps, irreps_out: o3.Irreps, correlation: int, num_species: int):
        super().__init__()
        if not 1 <= correlation <= 3:
            raise ValueError(f"correlation must be 1, 2 or 3, got {correlation}")
        self.irreps_in = o3.Irreps(irreps_in)
        self.irreps_out = o3.Irreps(irreps_out)
        self.correlation = correlation
        channels = {mul for mul, _ in self.irreps_in} | {mul for mul, _ in self.irreps_out}
        if len(channels) != 1:
            raise ValueError(f"all irreps need one multiplicity, got {self.irreps_in} and {self.irreps_out}")
        self.channels = channels.pop()
        targets = {ir for _, ir in self.irreps_out}
        inputs = {ir for _, ir in self.irreps_in}

        # order 1: the atomic basis itself, in path form (one path per matching irrep)
        order1 = o3.Irreps([(mul, ir) for mul, ir in self.irreps_in if ir in targets])
        self._order1_index = [i for i, (_, ir) in enumerate(self.irreps_in) if ir in targets]
        self.weigh1 = SpeciesWeightedSum(order1, self.irreps_out, num_species, self.channels)

        self.product2 = self.weigh2 = self.product3 = self.weigh3 = None
        if correlation >= 2:
            allowed2 = targets | (inputs if correlation >= 3 else set())
            paths2, irreps2 = _uuu_paths(self.irreps_in, self.irreps_in, allowed2, symmetric=True)
            self.product2 = o3.TensorProduct(self.irreps_in, self.irreps_in, irreps2, paths2, irrep_normalization="component")
            keep2 = o3.Irreps([(mul, ir) for mul, ir in irreps2 if ir in targets])
            self._order2_index = [i for i, (_, ir) in enumerate(irreps2) if ir in targets]
            self.weigh2 = SpeciesWeightedSum(keep2, self.irreps_out, num_species, self.channels)
        if correlation >= 3:
            paths3, irreps3 = _uuu_paths(irreps2, self.irreps_in, targets, symmetric=False)
            self.product3 = o3.TensorProduct(irreps2, self.irreps_in, irreps3, paths3, irrep_normalization="component")
            self.weigh3 = SpeciesWeightedSum(irreps3, self.irreps_out, num_species, self.channels)
        self.linear = o3.Linear(self.irreps_out, self.irreps_out)

    @staticmethod
    def _select(x: torch.Tensor, irreps: o3.Irreps, indices: list[int]) -> torch.Tensor:
        slices = irreps.slices()
        return torch.cat([x[:, slices[i]] for i in indices], dim=-1)

    def forward(self, atomic_basis: torch.Tensor, species: torch.Tensor) -> torch.Tensor:
        a = atomic_basis
        out = self.weigh1(self._select(a, self.irreps_in, self._order1_index), species)
        if self.product2 is not None:
            a2 = self.product2(a, a)
            out = out + self.weigh2(self._select(a2, self.product2.irreps_out, self._order2_index), species)
            if self.product3 is not None:
                out = out + self.weigh3(self.product3(a2, a), species)
        return self.linear(out)
