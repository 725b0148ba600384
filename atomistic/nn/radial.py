"""Radial basis functions and smooth cutoff envelopes."""

from __future__ import annotations

import math

import torch


class BesselBasis(torch.nn.Module):
    """``c sin(n π r / r_c) / r`` for ``n = 1 .. num_basis``, with ``c = sqrt(2/r_c)``
    (MACE) or ``c = 2/r_c`` (NequIP, SevenNet: ``prefactor="nequip"``).

    Forward: ``r [n_edges]`` Å → ``[n_edges, num_basis]``; with ``cutoff [n_edges]`` Å, each
    edge's basis is the one of its own cutoff (frequencies and prefactor rescaled from
    ``self.cutoff``).
    """

    def __init__(self, cutoff: float, num_basis: int = 8, trainable: bool = False, prefactor: str = "mace"):
        super().__init__()
        self.cutoff = float(cutoff)
        self.num_basis = int(num_basis)
        frequencies = math.pi / self.cutoff * torch.arange(1, num_basis + 1, dtype=torch.get_default_dtype())
        if trainable:
            self.frequencies = torch.nn.Parameter(frequencies)
        else:
            self.register_buffer("frequencies", frequencies)
        if prefactor not in ("mace", "nequip"):
            raise ValueError(f"prefactor must be 'mace' or 'nequip', got {prefactor!r}")
        self.prefactor_kind = prefactor
        self.prefactor = math.sqrt(2.0 / self.cutoff) if prefactor == "mace" else 2.0 / self.cutoff

    def forward(self, r: torch.Tensor, cutoff: torch.Tensor | None = None) -> torch.Tensor:
        if cutoff is None:
            r = r.unsqueeze(-1)
            return self.prefactor * torch.sin(self.frequencies * r) / r
        prefactor = torch.sqrt(2.0 / cutoff) if self.prefactor_kind == "mace" else 2.0 / cutoff
        scaled = (r * (self.cutoff / cutoff)).unsqueeze(-1)  # frequencies π n / cutoff_edge
        return prefactor.unsqueeze(-1) * torch.sin(self.frequencies * scaled) / r.unsqueeze(-1)


class PolynomialCutoff(torch.nn.Module):
    """Smooth envelope ``f(x)``, ``x = r / r_c``, with ``f(1) = f'(1) = f''(1) = 0`` and
    ``f = 0`` beyond the cutoff (Klicpera et al., DimeNet; exponent ``p``).

    Forward: ``r [n_edges]`` Å → ``[n_edges]``; with ``cutoff [n_edges]`` Å, each edge's
    envelope ends at its own cutoff.
    """

    def __init__(self, cutoff: float, exponent: int = 6):
        super().__init__()
        self.cutoff = float(cutoff)
        self.exponent = int(exponent)

    def forward(self, r: torch.Tensor, cutoff: torch.Tensor | None = None) -> torch.Tensor:
        p = self.exponent
        x = r / (self.cutoff if cutoff is None else cutoff)
        envelope = (
            1.0
            - (p + 1.0) * (p + 2.0) / 2.0 * x**p
            + p * (p + 2.0) * x ** (p + 1)
            - p * (p + 1.0) / 2.0 * x ** (p + 2)
        )
        return envelope * (x < 1.0)


class XPLORCutoff(torch.nn.Module):
    """XPLOR switching function: 1 below ``r_on``, then
    ``(r_c² - r²)² (r_c² + 2r² - 3r_on²) / (r_c² - r_on²)³`` down to 0 at ``r_c`` (continuous
    value and first derivative).

    Forward: ``r [n_edges]`` Å → ``[n_edges]``.
    """

    def __init__(self, cutoff: float, cutoff_on: float):
        super().__init__()
        if not 0 < cutoff_on < cutoff:
            raise ValueError(f"XPLOR cutoff needs 0 < cutoff_on ({cutoff_on}) < cutoff ({cutoff})")
        self.cutoff = float(cutoff)
        self.cutoff_on = float(cutoff_on)

    def forward(self, r: torch.Tensor) -> torch.Tensor:
        r2, on2, c2 = r * r, self.cutoff_on**2, self.cutoff**2
        switched = (c2 - r2) ** 2 * (c2 + 2 * r2 - 3 * on2) / (c2 - on2) ** 3
        return torch.where(r < self.cutoff_on, torch.ones_like(r), switched) * (r < self.cutoff)


class RadialEmbedding(torch.nn.Module):
    """Bessel basis times the cutoff envelope: ``r [n_edges]`` → ``[n_edges, num_basis]``;
    with ``cutoff [n_edges]`` (Å, at most ``self.cutoff``) both end at each edge's cutoff."""

    def __init__(self, cutoff: float, num_basis: int = 8, envelope_exponent: int = 6):
        super().__init__()
        self.basis = BesselBasis(cutoff, num_basis)
        self.envelope = PolynomialCutoff(cutoff, envelope_exponent)
        self.out_dim = num_basis

    def forward(self, r: torch.Tensor, cutoff: torch.Tensor | None = None) -> torch.Tensor:
        return self.basis(r, cutoff) * self.envelope(r, cutoff).unsqueeze(-1)

    @torch.no_grad()
    def mean_square(self, num_points: int = 2000) -> float:
        """Mean square of the embedding for points spread uniformly in the cutoff sphere;
        used to normalise the first layer of the radial network."""
        cutoff = self.basis.cutoff
        r = torch.linspace(cutoff / num_points, cutoff, num_points, dtype=torch.float64)
        values = self.forward(r.to(self.basis.frequencies.dtype)).to(torch.float64)
        weights = r**2 / (r**2).sum()
        return float((weights[:, None] * values**2).sum() / values.shape[1])
