"""MACE-class encoder: Bessel radial basis, spherical harmonics, channel-wise tensor-product
interactions and a product basis of correlation order 1–3, with residual updates.

The encoder writes node features only; energies, derivatives and tensors are the heads' job.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch
from e3nn import o3

from atomistic import keys
from atomistic.data.graph import AtomicGraph
from atomistic.nn.geometry import edge_vectors
from atomistic.nn.interaction import Interaction
from atomistic.nn.product_basis import ProductBasis
from atomistic.nn.radial import RadialEmbedding


@dataclasses.dataclass(frozen=True)
class MACEConfig:
    """Every hyperparameter of the MACE-class encoder.

    Attributes:
        species: atomic numbers the model supports, in species-index order.
        cutoff: radial cutoff, Å.
        num_bessel: number of Bessel radial functions.
        envelope_exponent: exponent ``p`` of the polynomial cutoff envelope.
        max_ell: highest degree of the edge spherical harmonics (0–3).
        channels: multiplicity ``C`` of every irrep of the node features.
        hidden_lmax: highest degree of the node features (≤ ``max_ell``).
        num_layers: number of interaction layers (1–4).
        correlation: body order of the product basis (1–3).
        radial_hidden: hidden widths of the radial MLP.
        avg_num_neighbors: average number of neighbours within the cutoff (normalises sums).
        species_radial: element-dependent radial functions: the radial MLP also reads the
            Bessel basis times the one-hot species of the edge's centre and of its neighbour
            (``num_bessel · (1 + 2 · n_species)`` inputs), so every element pair gets its own
            radial weights; every input still vanishes at the cutoff.
        species_cutoffs: a cutoff (Å, at most ``cutoff``) per species, in species-index order,
            or ``None`` for ``cutoff`` everywhere. An edge between elements ``a`` and ``b``
            then reaches ``(r_a + r_b) / 2``: its Bessel basis and envelope end there and longer
            edges are dropped, so each element sees as far as its own chemistry needs (the
            neighbour list still runs at ``cutoff``, the largest).
    """

    species: tuple[int, ...]
    cutoff: float = 5.0
    num_bessel: int = 8
    envelope_exponent: int = 6
    max_ell: int = 3
    channels: int = 32
    hidden_lmax: int = 1
    num_layers: int = 2
    correlation: int = 3
    radial_hidden: tuple[int, ...] = (64, 64, 64)
    avg_num_neighbors: float = 1.0
    species_radial: bool = False
    species_cutoffs: tuple[float, ...] | None = None

    def __post_init__(self):
        object.__setattr__(self, "species", tuple(int(z) for z in self.species))
        object.__setattr__(self, "radial_hidden", tuple(int(w) for w in self.radial_hidden))
        object.__setattr__(self, "species_radial", bool(self.species_radial))
        if self.species_cutoffs is not None:
            object.__setattr__(self, "species_cutoffs", tuple(float(r) for r in self.species_cutoffs))
        checks = [
            (len(self.species) >= 1, "species", "at least one species is required"),
            (self.cutoff > 0, "cutoff", "must be positive (Å)"),
            (self.num_bessel >= 1, "num_bessel", "must be >= 1"),
            (self.envelope_exponent >= 2, "envelope_exponent", "must be >= 2"),
            (0 <= self.max_ell <= 3, "max_ell", "must be between 0 and 3"),
            (self.channels >= 1, "channels", "must be >= 1"),
            (0 <= self.hidden_lmax <= self.max_ell, "hidden_lmax", "must be between 0 and max_ell"),
            (1 <= self.num_layers <= 4, "num_layers", "must be between 1 and 4"),
            (1 <= self.correlation <= 3, "correlation", "must be between 1 and 3"),
            (self.avg_num_neighbors > 0, "avg_num_neighbors", "must be positive"),
        ]
        if self.species_cutoffs is not None:
            checks += [
                (len(self.species_cutoffs) == len(self.species), "species_cutoffs", "needs one cutoff per species"),
                (
                    all(0 < r <= self.cutoff for r in self.species_cutoffs),
                    "species_cutoffs",
                    f"each must be positive and at most cutoff ({self.cutoff} Å)",
                ),
            ]
        for ok, field, reason in checks:
            if not ok:
                raise ValueError(f"MACEConfig.{field}={getattr(self, field)!r}: {reason}")

    @property
    def num_radial_features(self) -> int:
        """Inputs of the radial MLP per edge."""
        return self.num_bessel * (1 + 2 * len(self.species)) if self.species_radial else self.num_bessel

    @property
    def irreps_edge(self) -> o3.Irreps:
        return o3.Irreps.spherical_harmonics(self.max_ell)

    @property
    def irreps_hidden(self) -> o3.Irreps:
        return o3.Irreps([(self.channels, (degree, (-1) ** degree)) for degree in range(self.hidden_lmax + 1)])

    @property
    def irreps_atomic_basis(self) -> o3.Irreps:
        return o3.Irreps([(self.channels, (degree, (-1) ** degree)) for degree in range(self.max_ell + 1)])

    def pair_cutoffs(self) -> torch.Tensor | None:
        """``[n_species, n_species]`` cutoff (Å) of an edge between two species, or ``None``."""
        if self.species_cutoffs is None:
            return None
        per_species = torch.tensor(self.species_cutoffs, dtype=torch.float64)
        return (per_species[:, None] + per_species[None, :]) / 2

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["species"] = list(self.species)
        d["radial_hidden"] = list(self.radial_hidden)
        if self.species_cutoffs is None:
            del d["species_cutoffs"]  # architectures written before the field read the same
        else:
            d["species_cutoffs"] = list(self.species_cutoffs)
        return d


def species_radial_features(
    edge_radial: torch.Tensor, centre_onehot: torch.Tensor, neighbour_onehot: torch.Tensor
) -> torch.Tensor:
    """``[n_edges, B]`` radial basis and ``[n_edges, S]`` one-hot species of each edge's centre
    and neighbour → ``[n_edges, B · (1 + 2S)]``: the basis, then the basis times each one-hot."""
    n_edges, width = edge_radial.shape[0], edge_radial.shape[1] * centre_onehot.shape[1]
    by_centre = (edge_radial.unsqueeze(2) * centre_onehot.unsqueeze(1)).reshape(n_edges, width)
    by_neighbour = (edge_radial.unsqueeze(2) * neighbour_onehot.unsqueeze(1)).reshape(n_edges, width)
    return torch.cat([edge_radial, by_centre, by_neighbour], dim=1)


class MACELayer(torch.nn.Module):
    """Interaction → product basis → (+ species-wise residual)."""

    def __init__(
        self, config: MACEConfig, irreps_in: o3.Irreps, residual: bool, backend: str, radial_variance: float
    ):
        super().__init__()
        num_species = len(config.species)
        self.irreps_in = o3.Irreps(irreps_in)
        self.irreps_out = config.irreps_hidden
        self.interaction = Interaction(
            self.irreps_in,
            config.irreps_edge,
            config.irreps_atomic_basis,
            num_radial=config.num_radial_features,
            radial_hidden=config.radial_hidden,
            avg_num_neighbors=config.avg_num_neighbors,
            backend=backend,
            radial_variance=radial_variance,
        )
        self.product = ProductBasis(
            config.irreps_atomic_basis, self.irreps_out, config.correlation, num_species, backend=backend
        )
        self.residual = (
            o3.FullyConnectedTensorProduct(self.irreps_in, o3.Irreps(f"{num_species}x0e"), self.irreps_out)
            if residual
            else None
        )

    def forward(self, node_features, species_onehot, species, edge_attrs, edge_radial, centre, neighbour):
        atomic_basis = self.interaction(node_features, edge_attrs, edge_radial, centre, neighbour)
        updated = self.product(atomic_basis, species)
        if self.residual is not None:
            updated = updated + self.residual(node_features, species_onehot)
        return updated


class MACEEncoder(torch.nn.Module):
    """Writes ``node_features [n_atoms, irreps_out.dim]`` and
    ``node_features_per_layer [n_atoms, num_layers, irreps_out.dim]``.

    The first layer has no residual (so an atom without neighbours has zero features after
    every layer); later layers add a species-wise linear map of their input.
    """

    name = "mace"

    def __init__(self, config: MACEConfig, backend: str = "reference"):
        super().__init__()
        self.config = config
        self.backend = backend
        self.num_species = len(config.species)
        self.cutoff = config.cutoff
        self.irreps_out = config.irreps_hidden
        self.num_layers = config.num_layers
        irreps_embedding = o3.Irreps(f"{config.channels}x0e")
        self.embedding = o3.Linear(o3.Irreps(f"{self.num_species}x0e"), irreps_embedding)
        self.radial = RadialEmbedding(config.cutoff, config.num_bessel, config.envelope_exponent)
        pair_cutoffs = config.pair_cutoffs()
        self.per_pair_cutoff = pair_cutoffs is not None
        if self.per_pair_cutoff:
            self.register_buffer("pair_cutoffs", pair_cutoffs.to(torch.get_default_dtype()), persistent=False)
        self.spherical_harmonics = o3.SphericalHarmonics(config.irreps_edge, normalize=True, normalization="component")
        radial_variance = self.radial.mean_square()
        if config.species_radial:
            # of the radial MLP's Bessel-sized input blocks, 3 are non-zero on every edge
            radial_variance *= 3 * config.num_bessel / config.num_radial_features
        layers = []
        irreps_in = irreps_embedding
        for i in range(config.num_layers):
            layers.append(MACELayer(config, irreps_in, residual=i > 0, backend=backend, radial_variance=radial_variance))
            irreps_in = layers[-1].irreps_out
        self.layers = torch.nn.ModuleList(layers)

    def forward(self, graph: AtomicGraph) -> dict[str, torch.Tensor]:
        centre, neighbour = graph[keys.EDGE_INDEX][0], graph[keys.EDGE_INDEX][1]
        species = graph[keys.SPECIES_INDEX]
        vectors = edge_vectors(graph)
        lengths = torch.linalg.vector_norm(vectors, dim=-1)
        edge_cutoff = None
        if self.per_pair_cutoff:  # keep the edges inside their pair's cutoff
            edge_cutoff = self.pair_cutoffs[species[centre], species[neighbour]]
            inside = torch.nonzero(lengths < edge_cutoff).squeeze(1)
            centre, neighbour, vectors = centre[inside], neighbour[inside], vectors[inside]
            lengths, edge_cutoff = lengths[inside], edge_cutoff[inside]
        edge_attrs = self.spherical_harmonics(vectors)
        edge_radial = self.radial(lengths, edge_cutoff)  # [n_edges, num_bessel]
        species_onehot = torch.nn.functional.one_hot(species, self.num_species).to(vectors.dtype)
        if self.config.species_radial:
            edge_radial = species_radial_features(edge_radial, species_onehot[centre], species_onehot[neighbour])
        h = self.embedding(species_onehot)
        per_layer = []
        for layer in self.layers:
            h = layer(h, species_onehot, species, edge_attrs, edge_radial, centre, neighbour)
            per_layer.append(h)
        return {
            keys.NODE_FEATURES: h,
            keys.NODE_FEATURES_PER_LAYER: torch.stack(per_layer, dim=1),
        }
