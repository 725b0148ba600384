"""CEITNet-style heads for crystal tensors of order 2, 3 and 4 (Jin, Yuan, Tao, arXiv
2602.04323): Cartesian local-environment tensors, many-body mixing in channel space, and
outputs assembled from Cartesian bases with the exact index symmetries of each target.

For every atom ``i`` and radial channel ``c``, the local environment is summarised by the
Cartesian moments of its neighbour directions ``u = r̂_ij`` under learned edge weights
``R_c(r_ij) = ρ_c(r_ij) g_c(h_j)``: a radial MLP on a Bessel basis with a smooth envelope,
times a gate from the neighbour's invariant features (so the moments know what the neighbours are):

    v_i^c = Σ_j R_c u,     S_i^c = Σ_j R_c u⊗u,     M3_i^c = Σ_j R_c u⊗u⊗u,     M4_i^c = Σ_j R_c u⊗u⊗u⊗u

No Clebsch–Gordan products: many-body terms are products of these moments with per-atom
channel weights predicted from the encoder's invariant (``0e``) node features.  Every term is
a polynomial in the ``u`` and ``δ``, so the outputs transform exactly as tensors under O(3)
(``T(Rx) = R⊗…⊗R · T(x)``, reflections included); index symmetries are imposed by explicit
symmetrisation, and per-structure tensors are atom means.  The order-3 head uses only polar
vectors (odd numbers of ``u``), so it is odd under inversion and vanishes exactly (up to
rounding) for centrosymmetric crystals.

Heads write ``dielectric_tensor [n_systems, 3, 3]`` (unitless), ``piezoelectric_tensor
[n_systems, 3, 3, 3]`` (C/m², ``e_ijk = e_ikj``) and ``elastic_tensor [n_systems, 3, 3, 3, 3]``
(GPa, ``C_ijkl = C_jikl = C_ijlk = C_klij``).
"""

from __future__ import annotations

import torch
from e3nn import o3

from atomistic import keys
from atomistic.data.graph import AtomicGraph
from atomistic.nn.geometry import edge_vectors
from atomistic.nn.radial import RadialEmbedding

DIELECTRIC = keys.DIELECTRIC_TENSOR
PIEZOELECTRIC = keys.PIEZOELECTRIC_TENSOR
ELASTIC = keys.ELASTIC_TENSOR


def mean_per_system(per_atom: torch.Tensor, graph: AtomicGraph) -> torch.Tensor:
    """``[n_atoms, ...]`` → ``[n_systems, ...]``: the mean over each system's atoms."""
    n_systems = graph[keys.N_ATOMS].shape[0]
    total = per_atom.new_zeros((n_systems, *per_atom.shape[1:])).index_add(0, graph[keys.SYSTEM_IDX], per_atom)
    return total / graph[keys.N_ATOMS].to(per_atom.dtype).view(-1, *([1] * (per_atom.dim() - 1)))


def symmetrize_pair(tensor: torch.Tensor) -> torch.Tensor:
    """``[..., 3, 3]`` → its symmetric part."""
    return 0.5 * (tensor + tensor.transpose(-1, -2))


def symmetrize_piezo(tensor: torch.Tensor) -> torch.Tensor:
    """``[..., 3, 3, 3]`` → symmetric in the last two indices (``e_ijk = e_ikj``)."""
    return 0.5 * (tensor + tensor.transpose(-1, -2))


def symmetrize_elastic(tensor: torch.Tensor) -> torch.Tensor:
    """``[..., 3, 3, 3, 3]`` → the projection onto minor (``ij``, ``kl``) and major
    (``ij ↔ kl``) symmetry: the mean over that group of 8 index permutations.  Summed pair by
    pair (``a + b == b + a`` in floating point), so the symmetries hold bit for bit."""
    t = tensor + tensor.transpose(-4, -3)
    t = t + t.transpose(-2, -1)
    t = t + t.permute(*range(t.dim() - 4), t.dim() - 2, t.dim() - 1, t.dim() - 4, t.dim() - 3)
    return 0.125 * t


def scalar_feature_index(irreps: o3.Irreps) -> torch.Tensor:
    """Indices of the scalar (``0e``) components of features laid out as ``irreps``."""
    slices = [sl for (_, ir), sl in zip(irreps, irreps.slices(), strict=True) if ir == o3.Irrep("0e")]
    if not slices:
        raise ValueError(f"tensor heads need scalar (0e) node features, got {irreps}")
    return torch.cat([torch.arange(sl.start, sl.stop) for sl in slices])


class EdgeChannelWeights(torch.nn.Module):
    """Per-edge channel weights ``R_c(r_ij) = ρ_c(r_ij) g_c(h_j)``: a radial MLP on a Bessel
    basis with a smooth envelope (``R_c(r_cut) = 0``), times a gate from the neighbour's
    invariant features when ``num_scalars > 0``.  Shared by the Cartesian and spherical heads."""

    def __init__(self, cutoff: float, channels: int, num_bessel: int = 8, hidden: int = 32, num_scalars: int = 0):
        super().__init__()
        self.channels = channels
        self.radial = RadialEmbedding(cutoff, num_bessel, 6)
        self.radial_mlp = torch.nn.Sequential(
            torch.nn.Linear(num_bessel, hidden), torch.nn.SiLU(), torch.nn.Linear(hidden, channels)
        )
        self.neighbour_gate = torch.nn.Linear(num_scalars, channels) if num_scalars else None

    def channel_weights(self, graph: AtomicGraph, lengths: torch.Tensor, node_scalars: torch.Tensor | None) -> torch.Tensor:
        """``lengths [E]`` Å, ``node_scalars [n_atoms, F]`` → ``[E, C]``."""
        weights = self.radial_mlp(self.radial(lengths))
        if self.neighbour_gate is not None and node_scalars is not None:
            weights = weights * self.neighbour_gate(node_scalars).index_select(0, graph[keys.EDGE_INDEX][1])
        return weights


class CartesianEnvironment(EdgeChannelWeights):
    """Per-atom Cartesian moments of the neighbour directions, mixed in channel space.

    Forward: ``graph``, neighbour scalars ``[n_atoms, F]`` (or None), and per order ``n`` the
    centre atoms' mixing weights ``W_n [n_atoms, K_n, C]`` (or None: that order is not used) →
    list of mixed moments ``[n_atoms, K_n, 3, …(n times)]``::

        Σ_c W_n[i, k, c] Σ_j R_c(r_ij) u⊗…⊗u  =  Σ_j (Σ_c W_n[i, k, c] R_c(r_ij)) u⊗…⊗u

    The right-hand side is what is computed: mixing the edge weights before the neighbour sum
    never forms the ``C`` unmixed moments, so time and memory scale with ``K_n`` (the few
    mixtures a head uses), not with ``C × 3ⁿ``.
    """

    def __init__(self, cutoff: float, channels: int, order: int, num_bessel: int = 8, hidden: int = 32, num_scalars: int = 0):
        super().__init__(cutoff, channels, num_bessel, hidden, num_scalars)
        self.order = order

    def forward(
        self, graph: AtomicGraph, node_scalars: torch.Tensor | None, mixing: list[torch.Tensor | None]
    ) -> list[torch.Tensor | None]:
        vectors = edge_vectors(graph)
        lengths = torch.linalg.vector_norm(vectors, dim=-1)
        u = vectors / lengths.clamp_min(1e-9).unsqueeze(-1)  # [E, 3]
        weights = self.channel_weights(graph, lengths, node_scalars)  # [E, C]
        centre = graph[keys.EDGE_INDEX][0]
        n_atoms = graph[keys.POSITIONS].shape[0]
        moments: list[torch.Tensor | None] = []
        outer = u
        for order in range(1, self.order + 1):
            if order > 1:
                outer = outer.unsqueeze(-1) * u.view(u.shape[0], *([1] * (order - 1)), 3)
            if mixing[order - 1] is None:
                moments.append(None)
                continue
            mixed = torch.einsum("ec,ekc->ek", weights, mixing[order - 1].index_select(0, centre))  # [E, K]
            per_edge = mixed.view(*mixed.shape, *([1] * order)) * outer.unsqueeze(1)  # [E, K, 3, ...]
            moments.append(per_edge.new_zeros((n_atoms, *per_edge.shape[1:])).index_add(0, centre, per_edge))
        return moments


class _TensorHead(torch.nn.Module):
    """Shared plumbing: scalar node features → per-atom coefficients of each basis term."""

    requires = (keys.NODE_FEATURES,)
    isolated_atom_is_reference = False
    order = 0
    output_key = ""

    def __init__(self, irreps_in: o3.Irreps, cutoff: float, channels: int = 8, hidden: int = 32, num_terms: int = 1, scale: float = 1.0):
        super().__init__()
        self.irreps_in = o3.Irreps(irreps_in)
        self.register_buffer("scalar_index", scalar_feature_index(self.irreps_in), persistent=False)
        self.channels = channels
        self.environment = CartesianEnvironment(cutoff, channels, self.order, num_scalars=int(self.scalar_index.numel()))
        self.coefficients = torch.nn.Sequential(
            torch.nn.Linear(int(self.scalar_index.numel()), hidden), torch.nn.SiLU(), torch.nn.Linear(hidden, num_terms)
        )
        self.scale = scale

    def _scalars_and_coefficients(self, outputs) -> tuple[torch.Tensor, torch.Tensor]:
        """Scalar node features ``[n_atoms, F]`` and the per-atom coefficients ``[n_atoms, num_terms]``."""
        scalars = outputs[keys.NODE_FEATURES].index_select(1, self.scalar_index)
        return scalars, self.coefficients(scalars)


class DielectricHead(_TensorHead):
    """Order 2, ``ε_ij = ε_ji`` (unitless): ``a δ + S + Σ_p (v_p ⊗ v'_p + S'_p · S''_p)`` with
    mixed channels (``S = Σ_c b_c S^c``, ``v = Σ_c w_c v^c``; the products are many-body),
    symmetrised, plus the vacuum baseline 1·δ."""

    order = 2
    output_key = DIELECTRIC

    def __init__(self, irreps_in, cutoff, channels: int = 8, hidden: int = 32, scale: float = 1.0, pairs: int = 1):
        self.pairs = pairs
        super().__init__(irreps_in, cutoff, channels, hidden, num_terms=1 + (1 + 4 * pairs) * channels, scale=scale)

    def forward(self, graph, outputs):
        scalars, coeff = self._scalars_and_coefficients(outputs)
        p = self.pairs
        iso, w = coeff[:, :1], coeff[:, 1:].view(coeff.shape[0], 1 + 4 * p, self.channels)
        # mixtures in the order S, v_1..v_p, v'_1..v'_p, S'_1..S'_p, S''_1..S''_p
        symmetric = torch.cat([w[:, :1], w[:, 1 + 2 * p :]], dim=1)
        (v, s) = self.environment(graph, scalars, [w[:, 1 : 1 + 2 * p], symmetric])
        eye = torch.eye(3, dtype=v.dtype, device=v.device)
        products = torch.einsum("npi,npj->nij", v[:, :p], v[:, p:]) + torch.einsum("npik,npkj->nij", s[:, 1 : 1 + p], s[:, 1 + p :])
        per_atom = iso.view(-1, 1, 1) * eye + s[:, 0] + symmetrize_pair(products)
        return {DIELECTRIC: eye + self.scale * mean_per_system(per_atom, graph)}


class PiezoelectricHead(_TensorHead):
    """Order 3, ``e_ijk = e_ikj`` (C/m²), polar: ``Σ a v_i δ_jk + b (v_j δ_ik + v_k δ_ij)/2 +
    M3 + v_i (v'_j v''_k + v'_k v''_j)/2``, built only from polar vectors (odd in ``u``)."""

    order = 3
    output_key = PIEZOELECTRIC

    def __init__(self, irreps_in, cutoff, channels: int = 8, hidden: int = 32, scale: float = 1.0):
        super().__init__(irreps_in, cutoff, channels, hidden, num_terms=6 * channels, scale=scale)

    def forward(self, graph, outputs):
        scalars, coeff = self._scalars_and_coefficients(outputs)
        w = coeff.view(coeff.shape[0], 6, self.channels)
        # mixtures: five polar vectors (w0..w4) and one third moment (w5); S is not used
        v, _, m3 = self.environment(graph, scalars, [w[:, 0:5], None, w[:, 5:6]])
        eye = torch.eye(3, dtype=v.dtype, device=v.device)
        a, b, p, q, r = v.unbind(1)  # mixed polar vectors [n, 3]
        term_a = torch.einsum("ni,jk->nijk", a, eye)
        term_b = 0.5 * (torch.einsum("nj,ik->nijk", b, eye) + torch.einsum("nk,ij->nijk", b, eye))
        term_m3 = m3[:, 0]
        term_p = torch.einsum("ni,nj,nk->nijk", p, q, r)
        per_atom = symmetrize_piezo(term_a + term_b + term_m3 + term_p)
        return {PIEZOELECTRIC: self.scale * mean_per_system(per_atom, graph)}


class ElasticHead(_TensorHead):
    """Order 4, ``C_ijkl`` (GPa) with minor and major symmetry, symmetrised:

        λ δ_ij δ_kl + μ (δ_ik δ_jl + δ_il δ_jk) + A_ij δ_kl + B_ik δ_jl + Σ_p P^p_ij Q^p_kl + M4_ijkl

    with ``A``, ``B``, ``P^p``, ``Q^p`` mixed second moments and ``M4`` the mixed fourth
    moment.  After symmetrisation the terms span the target's irreps: two invariants (λ, μ),
    the two independent ``2e`` parts (``A`` and ``B`` in their two index patterns) and the
    ``4e`` part (``M4``, two-body, and ``P ⊗ Q``, many-body)."""

    order = 4
    output_key = ELASTIC

    def __init__(self, irreps_in, cutoff, channels: int = 8, hidden: int = 32, scale: float = 100.0, pairs: int = 1):
        self.pairs = pairs
        super().__init__(irreps_in, cutoff, channels, hidden, num_terms=2 + (3 + 2 * pairs) * channels, scale=scale)

    def forward(self, graph, outputs):
        scalars, coeff = self._scalars_and_coefficients(outputs)
        lam, mu = coeff[:, 0], coeff[:, 1]
        w = coeff[:, 2:].view(coeff.shape[0], -1, self.channels)
        # mixtures: A, B, P^1..P^p, Q^1..Q^p (second moments) and one fourth moment
        _, s, _, m4 = self.environment(graph, scalars, [None, w[:, :-1], None, w[:, -1:]])
        eye = torch.eye(3, dtype=s.dtype, device=s.device)
        dd = torch.einsum("ij,kl->ijkl", eye, eye)
        shear = torch.einsum("ik,jl->ijkl", eye, eye) + torch.einsum("il,jk->ijkl", eye, eye)
        p, q = s[:, 2 : 2 + self.pairs], s[:, 2 + self.pairs :]
        per_atom = (
            lam.view(-1, 1, 1, 1, 1) * dd
            + mu.view(-1, 1, 1, 1, 1) * shear
            + torch.einsum("nij,kl->nijkl", s[:, 0], eye)
            + torch.einsum("nik,jl->nijkl", s[:, 1], eye)
            + torch.einsum("npij,npkl->nijkl", p, q)
            + m4[:, 0]
        )
        return {ELASTIC: self.scale * mean_per_system(symmetrize_elastic(per_atom), graph)}


class SphericalTensorHead(torch.nn.Module):
    """The spherical-harmonic baseline (MatTen-style) on the same encoder: the target is
    decomposed into irreps with e3nn's ``CartesianTensor`` (``ij=ji`` → 0e+2e, ``ijk=ikj`` →
    2×1o+2o+3o, ``ijkl=jikl=klij`` → 2×0e+2×2e+4e); per-atom spherical-harmonic moments
    ``A = Σ_j R_c(r_ij) Y(r̂_ij)`` (l ≤ 4) are coupled to those irreps with Clebsch–Gordan
    tensor products (``A ⊗ A`` and ``A ⊗ scalars``), averaged per system and mapped back to
    the Cartesian tensor.  Exactly equivariant; the index symmetries come from the basis.

    Writes ``output_key`` ``[n_systems, 3, …, 3]`` in the same units as the Cartesian head.
    """

    requires = (keys.NODE_FEATURES,)
    isolated_atom_is_reference = False

    FORMULAS = {DIELECTRIC: "ij=ji", PIEZOELECTRIC: "ijk=ikj", ELASTIC: "ijkl=jikl=klij"}

    def __init__(self, irreps_in: o3.Irreps, cutoff: float, output_key: str, channels: int = 8, lmax: int = 4, hidden: int = 32, scale: float = 1.0):
        super().__init__()
        from e3nn.io import CartesianTensor

        self.output_key = output_key
        self.cartesian = CartesianTensor(self.FORMULAS[output_key])
        self.irreps_in = o3.Irreps(irreps_in)
        self.register_buffer("scalar_index", scalar_feature_index(self.irreps_in), persistent=False)
        self.irreps_sh = o3.Irreps.spherical_harmonics(lmax)
        self.spherical_harmonics = o3.SphericalHarmonics(self.irreps_sh, normalize=True, normalization="component")
        self.channels = channels
        # the same edge weights as the Cartesian heads: radial MLP times a neighbour gate
        self.edge_weights = EdgeChannelWeights(cutoff, channels, hidden=hidden, num_scalars=int(self.scalar_index.numel()))
        self.irreps_moments = o3.Irreps([(channels, ir) for _, ir in self.irreps_sh])
        index = []  # [C, D_sh] channel-major -> mul_ir layout of irreps_moments
        for (_, ir), block in zip(self.irreps_moments, self.irreps_moments.slices(), strict=True):
            index.append(torch.arange(block.start, block.stop).view(channels, ir.dim))
        self.register_buffer("moment_index", torch.cat(index, dim=1).reshape(-1).argsort(), persistent=False)
        irreps_target = self.cartesian
        irreps_scalars = o3.Irreps(f"{int(self.scalar_index.numel())}x0e")
        self.pair_product = o3.FullyConnectedTensorProduct(self.irreps_moments, self.irreps_moments, irreps_target)
        self.scalar_product = o3.FullyConnectedTensorProduct(self.irreps_moments, irreps_scalars, irreps_target)
        self.scale = scale

    def forward(self, graph: AtomicGraph, outputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        vectors = edge_vectors(graph)
        lengths = torch.linalg.vector_norm(vectors, dim=-1)
        scalars = outputs[keys.NODE_FEATURES].index_select(1, self.scalar_index)
        weights = self.edge_weights.channel_weights(graph, lengths, scalars)  # [E, C]
        per_edge = weights.unsqueeze(-1) * self.spherical_harmonics(vectors).unsqueeze(1)  # [E, C, D_sh]
        n_atoms = graph[keys.POSITIONS].shape[0]
        moments = per_edge.new_zeros((n_atoms, *per_edge.shape[1:])).index_add(0, graph[keys.EDGE_INDEX][0], per_edge)
        moments = moments.reshape(n_atoms, -1).index_select(1, self.moment_index)  # mul_ir layout
        irreps = self.pair_product(moments, moments) + self.scalar_product(moments, scalars)
        tensor = self.scale * self.cartesian.to_cartesian(mean_per_system(irreps, graph))
        if self.output_key == DIELECTRIC:  # the vacuum baseline, as in the Cartesian head
            tensor = tensor + torch.eye(3, dtype=tensor.dtype, device=tensor.device)
        return {self.output_key: tensor}
