"""A committee of potentials over the same elements: their mean as the prediction.

Energy, per-atom energies, forces, stress and crystal tensors are the members' weighted means.
Forces and stress stay the exact derivatives of the mean energy (a derivative of a mean is the
mean of the derivatives), so every physical check that holds for the members holds for the
committee. Members may differ in architecture, cutoff and species order: the committee's
neighbour list reaches the largest member cutoff, and each member reads only its own edges,
with its own species indices.

Why: members trained differently make partly independent errors, so their mean is more
accurate than either; their disagreement is ``forces_spread`` (:data:`atomistic.keys.FORCES_SPREAD`,
``[n_atoms]`` eV/Å), the root-mean-square deviation of the members' forces from the mean force on each atom,
a measure of how far a structure lies from what the members agree on.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from atomistic import keys
from atomistic.data.graph import AtomicGraph, SpeciesMap
from atomistic.models.potential import Potential, PotentialBase, PotentialMetadata


def edges_within(graph: AtomicGraph, cutoff: float) -> AtomicGraph:
    """A shallow copy of ``graph`` keeping the edges shorter than ``cutoff`` Å (the choice of
    edges carries no gradient; the kept edges' vectors are recomputed by the model)."""
    with torch.no_grad():
        centre, neighbour = graph[keys.EDGE_INDEX]
        edge_system = graph[keys.SYSTEM_IDX][centre]
        shifts = torch.einsum("ek,ekj->ej", graph[keys.EDGE_SHIFT], graph[keys.CELL][edge_system])
        lengths = torch.linalg.vector_norm(graph[keys.POSITIONS][neighbour] - graph[keys.POSITIONS][centre] + shifts, dim=-1)
        keep = lengths < cutoff
    out = dict(graph)
    out[keys.EDGE_INDEX] = graph[keys.EDGE_INDEX][:, keep]
    out[keys.EDGE_SHIFT] = graph[keys.EDGE_SHIFT][keep]
    return out


class Committee(PotentialBase):
    """The weighted mean of ``members`` (:class:`Potential` s with energy heads over one set of
    elements). ``weights`` default to equal; they are normalised to sum to one."""

    def __init__(self, members: Sequence[Potential], weights: Sequence[float] | None = None, metadata: PotentialMetadata | None = None):
        super().__init__()
        if len(members) < 2:
            raise ValueError(f"a committee needs at least two members, got {len(members)}")
        elements = [sorted(m.atomic_numbers) for m in members]
        if any(e != elements[0] for e in elements):
            raise ValueError(f"committee members must cover the same elements, got {elements}")
        if not all(m.has_energy for m in members):
            raise ValueError("committee members must all have an energy head")
        weights = [1.0] * len(members) if weights is None else [float(w) for w in weights]
        if len(weights) != len(members) or any(not w > 0 for w in weights):
            raise ValueError(f"committee weights must be one positive number per member, got {weights}")
        self.members = torch.nn.ModuleList(members)
        self.weights = [w / sum(weights) for w in weights]
        self.species = SpeciesMap(members[0].atomic_numbers)
        self.cutoff = max(m.cutoff for m in members)
        self.metadata = metadata or PotentialMetadata(name="committee", backend=members[0].metadata.backend)
        # each member's species index of each atomic number (members may order species differently)
        for i, member in enumerate(members):
            self.register_buffer(f"_species_lookup_{i}", torch.tensor(member.species.lookup), persistent=False)

    @property
    def has_energy(self) -> bool:
        return True

    @property
    def properties(self) -> tuple[str, ...]:
        """What every member provides, and the members' force spread."""
        shared = tuple(p for p in self.members[0].properties if all(p in m.properties for m in self.members))
        return (*shared, keys.FORCES_SPREAD)

    @property
    def encoder_name(self) -> str:
        return "committee(" + ", ".join(m.encoder_name for m in self.members) + ")"

    @property
    def species_cutoffs(self) -> tuple[float, ...] | None:
        return None

    def pair_cutoffs(self) -> dict[tuple[int, int], float]:
        """Per pair of elements, the largest member cutoff: beyond it the pair does not interact."""
        pairs: dict[tuple[int, int], float] = {}
        for member in self.members:
            for pair, cutoff in member.pair_cutoffs().items():
                pairs[pair] = max(pairs.get(pair, 0.0), cutoff)
        return pairs

    @property
    def has_parity(self) -> bool:
        return all(m.has_parity for m in self.members)

    @property
    def isolated_atom_is_reference(self) -> bool:
        return all(m.isolated_atom_is_reference for m in self.members)

    def reference_energy(self, atomic_number: int) -> float:
        """The weighted mean of the members' isolated-atom energies, eV."""
        return sum(w * m.reference_energy(atomic_number) for w, m in zip(self.weights, self.members, strict=True))

    def forward(
        self,
        graph: AtomicGraph,
        compute_forces: bool = True,
        compute_stress: bool = False,
        training: bool = False,
    ) -> dict[str, torch.Tensor]:
        """The members' weighted means of what they all return, and with forces the spread
        ``forces_spread`` ``[n_atoms]`` eV/Å."""
        if training:
            raise ValueError("a committee is not trained as one model; train (or fine-tune) its members")
        outputs = []
        for i, member in enumerate(self.members):
            member_graph = edges_within(graph, member.cutoff) if member.cutoff < self.cutoff else dict(graph)
            member_graph[keys.SPECIES_INDEX] = getattr(self, f"_species_lookup_{i}")[graph[keys.ATOMIC_NUMBERS]]
            outputs.append(member(member_graph, compute_forces=compute_forces, compute_stress=compute_stress))
        shared = [k for k in outputs[0] if all(k in o for o in outputs)]
        mean = {k: sum(w * o[k] for w, o in zip(self.weights, outputs, strict=True)) for k in shared}
        if keys.FORCES in mean:
            deviation = sum(w * (o[keys.FORCES] - mean[keys.FORCES]).square().sum(-1) for w, o in zip(self.weights, outputs, strict=True))
            mean[keys.FORCES_SPREAD] = deviation.sqrt()
        return mean
