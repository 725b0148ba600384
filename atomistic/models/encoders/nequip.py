"""NequIP-class encoder (Batzner et al., 2022), with every option that the SevenNet
potentials use: gated equivariant nonlinearities, linear or species-wise self-connections,
Bessel radial basis with trainable frequencies, polynomial or XPLOR cutoff, parity on or off,
per-layer irreps and a fixed neighbour-sum denominator.

The encoder writes ``node_features`` of the last layer; energies are the heads' job.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from e3nn import o3
from e3nn.nn import FullyConnectedNet, Gate

from atomistic import keys
from atomistic.data.graph import AtomicGraph
from atomistic.kernels import ConvolutionSpec, make_convolution, make_linear
from atomistic.nn.activations import activation
from atomistic.nn.geometry import edge_vectors
from atomistic.nn.radial import BesselBasis, PolynomialCutoff, XPLORCutoff


@dataclasses.dataclass(frozen=True)
class NequIPConfig:
    """Every hyperparameter of the NequIP-class encoder.

    Attributes:
        species: atomic numbers, in species-index order.
        cutoff: radial cutoff, Å.
        num_bessel: Bessel radial functions (frequencies trainable).
        cutoff_function: ``"polynomial"`` (exponent ``envelope_exponent``) or ``"xplor"``
            (switching from ``cutoff_on``).
        sh_lmax: highest degree of the edge spherical harmonics.
        parity: whether irreps carry parity (odd harmonics are ``1o``); off: all even.
        irreps_layers: node irreps after the embedding and after each layer
            (``num_layers + 1`` entries), e.g. ``["128x0e", "128x0e+64x1e+32x2e", ..., "128x0e"]``.
        radial_hidden: hidden widths of the radial MLP; ``radial_activation`` its activation.
        scalar_activation / gate_activation: for even (``"e"``) and odd (``"o"``) scalars.
        self_connection: ``"linear"`` (linear map) or ``"species"`` (tensor product with the
            one-hot species, as original NequIP).
        conv_denominator: what the neighbour sum is divided by, one value per layer
            (SevenNet: the square root of the average neighbour count).
    """

    species: tuple[int, ...]
    irreps_layers: tuple[str, ...]
    cutoff: float = 5.0
    num_bessel: int = 8
    cutoff_function: str = "polynomial"
    envelope_exponent: int = 6
    cutoff_on: float = 4.5
    sh_lmax: int = 2
    parity: bool = True
    radial_hidden: tuple[int, ...] = (64, 64)
    radial_activation: str = "silu"
    scalar_activation: dict[str, str] = dataclasses.field(default_factory=lambda: {"e": "silu", "o": "tanh"})
    gate_activation: dict[str, str] = dataclasses.field(default_factory=lambda: {"e": "silu", "o": "tanh"})
    self_connection: str = "linear"
    conv_denominator: tuple[float, ...] = (1.0,)

    def __post_init__(self):
        object.__setattr__(self, "species", tuple(int(z) for z in self.species))
        object.__setattr__(self, "irreps_layers", tuple(str(o3.Irreps(i)) for i in self.irreps_layers))
        object.__setattr__(self, "radial_hidden", tuple(int(w) for w in self.radial_hidden))
        neighbours = tuple(float(a) for a in self.conv_denominator)
        if len(neighbours) == 1:
            neighbours = neighbours * self.num_layers
        object.__setattr__(self, "conv_denominator", neighbours)
        checks = [
            (len(self.irreps_layers) >= 2, "irreps_layers", "needs the embedding irreps and at least one layer"),
            (self.cutoff > 0, "cutoff", "must be positive (Å)"),
            (self.cutoff_function in ("polynomial", "xplor"), "cutoff_function", "must be 'polynomial' or 'xplor'"),
            (self.self_connection in ("linear", "species"), "self_connection", "must be 'linear' or 'species'"),
            (0 <= self.sh_lmax <= 3, "sh_lmax", "must be between 0 and 3"),
            (len(self.conv_denominator) == self.num_layers, "conv_denominator", "needs one value per layer"),
            (o3.Irreps(self.irreps_layers[0]).lmax == 0, "irreps_layers", "the embedding irreps must be scalars"),
        ]
        for ok, field, reason in checks:
            if not ok:
                raise ValueError(f"NequIPConfig.{field}={getattr(self, field)!r}: {reason}")

    @property
    def num_layers(self) -> int:
        return len(self.irreps_layers) - 1

    @property
    def irreps_edge(self) -> o3.Irreps:
        return o3.Irreps.spherical_harmonics(self.sh_lmax, p=-1 if self.parity else 1)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        for key in ("species", "irreps_layers", "radial_hidden", "conv_denominator"):
            d[key] = list(d[key])
        return d


def _gate(irreps_out: o3.Irreps, scalar_act: dict[str, str], gate_act: dict[str, str]) -> Gate:
    """e3nn Gate producing ``irreps_out``: scalars activated, each non-scalar gated by a scalar."""
    parity_name = {1: "e", -1: "o"}
    scalars = o3.Irreps([(mul, ir) for mul, ir in irreps_out if ir.l == 0])
    gated = o3.Irreps([(mul, ir) for mul, ir in irreps_out if ir.l > 0])
    gate_parity = 1 if o3.Irrep("0e") in scalars else -1
    gates = o3.Irreps([(mul, (0, gate_parity)) for mul, _ in gated])
    return Gate(
        scalars,
        [activation(scalar_act[parity_name[ir.p]]) for _, ir in scalars],
        gates,
        [activation(gate_act[parity_name[ir.p]]) for _, ir in gates],
        gated,
    )


class NequIPLayer(torch.nn.Module):
    """self-connection + linear → convolution → linear, summed, then the gate."""

    def __init__(self, config: NequIPConfig, index: int, backend: str):
        super().__init__()
        self.irreps_in = o3.Irreps(config.irreps_layers[index])
        self.irreps_out = o3.Irreps(config.irreps_layers[index + 1])
        num_species = len(config.species)
        self.gate = _gate(self.irreps_out, config.scalar_activation, config.gate_activation)
        irreps_gate_in = self.gate.irreps_in
        if config.self_connection == "linear":
            self.self_connection = make_linear(self.irreps_in, irreps_gate_in, backend)
        else:
            self.self_connection = o3.FullyConnectedTensorProduct(self.irreps_in, o3.Irreps(f"{num_species}x0e"), irreps_gate_in)
        self.uses_species = config.self_connection == "species"
        self.linear_in = make_linear(self.irreps_in, self.irreps_in, backend)
        parities = (1, -1) if config.parity else (1,)
        if self.irreps_out.lmax == 0:  # a scalar-only layer keeps only even scalars
            parities = tuple(sorted({ir.p for _, ir in self.irreps_out}))
        self.spec = ConvolutionSpec(
            irreps_node=str(self.irreps_in),
            irreps_edge=str(config.irreps_edge),
            lmax_out=self.irreps_out.lmax,
            parity_out=parities,
            sort_output=True,
        )
        self.convolution = make_convolution(self.spec, backend)
        self.radial_mlp = FullyConnectedNet(
            [config.num_bessel, *config.radial_hidden, self.spec.weight_numel], activation(config.radial_activation)
        )
        # the sorted path outputs, merged (same memory layout, the weight layout NequIP uses)
        self.linear_out = make_linear(self.spec.irreps_out.simplify(), irreps_gate_in, backend)
        self.conv_denominator = config.conv_denominator[index]

    def forward(self, node_features, species_onehot, edge_attrs, edge_radial, centre, neighbour):
        if self.uses_species:
            skip = self.self_connection(node_features, species_onehot)
        else:
            skip = self.self_connection(node_features)
        h = self.linear_in(node_features)
        messages = self.convolution(h, edge_attrs, self.radial_mlp(edge_radial), centre, neighbour)
        return self.gate(self.linear_out(messages / self.conv_denominator) + skip)


class NequIPEncoder(torch.nn.Module):
    """Writes ``node_features [n_atoms, irreps_out.dim]`` (the last layer's features)."""

    name = "nequip"

    def __init__(self, config: NequIPConfig, backend: str = "reference"):
        super().__init__()
        self.config = config
        self.backend = backend
        self.num_species = len(config.species)
        self.cutoff = config.cutoff
        self.num_layers = config.num_layers
        self.irreps_out = o3.Irreps(config.irreps_layers[-1])
        self.radial_basis = BesselBasis(config.cutoff, config.num_bessel, trainable=True, prefactor="nequip")
        if config.cutoff_function == "xplor":
            self.cutoff_envelope = XPLORCutoff(config.cutoff, config.cutoff_on)
        else:
            self.cutoff_envelope = PolynomialCutoff(config.cutoff, config.envelope_exponent)
        self.spherical_harmonics = o3.SphericalHarmonics(config.irreps_edge, normalize=True, normalization="component")
        self.embedding = o3.Linear(o3.Irreps(f"{self.num_species}x0e"), o3.Irreps(config.irreps_layers[0]))
        self.layers = torch.nn.ModuleList(NequIPLayer(config, i, backend) for i in range(config.num_layers))

    def forward(self, graph: AtomicGraph) -> dict[str, torch.Tensor]:
        centre, neighbour = graph[keys.EDGE_INDEX][0], graph[keys.EDGE_INDEX][1]
        vectors = edge_vectors(graph)
        lengths = torch.linalg.vector_norm(vectors, dim=-1)
        edge_attrs = self.spherical_harmonics(vectors)
        edge_radial = self.radial_basis(lengths) * self.cutoff_envelope(lengths).unsqueeze(-1)
        species_onehot = torch.nn.functional.one_hot(graph[keys.SPECIES_INDEX], self.num_species).to(vectors.dtype)
        h = self.embedding(species_onehot)
        for layer in self.layers:
            h = layer(h, species_onehot, edge_attrs, edge_radial, centre, neighbour)
        return {keys.NODE_FEATURES: h}
