"""``Potential`` = encoder + heads + metadata: the one object every entry point calls."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from atomistic import keys
from atomistic.data.convert import (
    DEFAULT_MAX_ATOMS,
    StructureError,
    to_structures,
    to_structures_or_errors,
)
from atomistic.data.graph import (
    AtomicGraph,
    SpeciesMap,
    batches_by_atoms,
    build_graph,
    split_results,
)
from atomistic.models.heads.forces import attach_strain, energy_derivatives


@dataclasses.dataclass
class PotentialMetadata:
    """What a checkpoint says about a model besides its weights."""

    name: str = "unnamed"
    architecture: dict[str, Any] = dataclasses.field(default_factory=dict)
    units: dict[str, str] = dataclasses.field(
        default_factory=lambda: {
            "energy": "eV", "forces": "eV/Å", "stress": "eV/Å^3", "length": "Å",
            "dielectric_tensor": "1", "piezoelectric_tensor": "C/m^2", "elastic_tensor": "GPa",
        }
    )
    provenance: dict[str, Any] = dataclasses.field(default_factory=dict)
    metrics: dict[str, Any] = dataclasses.field(default_factory=dict)
    backend: str = "reference"


class PotentialBase(torch.nn.Module):
    """What every model offers its callers: ``forward(graph, compute_forces, compute_stress)``
    on a graph built with :attr:`cutoff` and :attr:`species`, and :meth:`predict` on structures.

    Subclasses (:class:`Potential`, :class:`~atomistic.models.committee.Committee`) set
    ``species`` (:class:`SpeciesMap`), ``cutoff`` (Å, the neighbour-list radius) and
    ``metadata``, and describe themselves with ``has_energy``, ``properties``, ``encoder_name``,
    ``species_cutoffs``, ``pair_cutoffs()``, ``has_parity``, ``isolated_atom_is_reference`` and
    ``reference_energy(Z)``.
    """

    species: SpeciesMap
    cutoff: float
    metadata: PotentialMetadata

    @property
    def default_properties(self) -> tuple[str, ...]:
        """What :meth:`predict` returns when not told: energy, forces and stress, or the tensors."""
        return (keys.ENERGY, keys.FORCES, keys.STRESS) if self.has_energy else self.properties

    @property
    def atomic_numbers(self) -> tuple[int, ...]:
        return self.species.atomic_numbers

    @property
    def dtype(self) -> torch.dtype:
        return next(self.parameters()).dtype

    @property
    def device(self) -> torch.device:
        return next(self.parameters()).device

    def predict(
        self,
        structures: Any,
        properties: Sequence[str] | None = None,
        *,
        max_atoms_per_batch: int = 4096,
        max_atoms: int = DEFAULT_MAX_ATOMS,
        errors: str = "raise",
    ) -> list[dict[str, Any]]:
        """Energies (eV), per-atom energies (eV), forces (eV/Å), stress (eV/Å³, 3x3), crystal
        tensors and, from a committee, ``forces_spread`` (eV/Å per atom) per structure (see
        :attr:`properties`); ``properties=None`` gives :attr:`default_properties`.

        ``structures`` may be any input that :func:`atomistic.data.to_structures` accepts
        (one or many).  Stress is omitted for structures without a cell volume.

        ``errors="raise"`` raises :class:`~atomistic.data.StructureError` for the first bad
        structure; ``errors="return"`` puts ``{"error": StructureError}`` in a bad structure's
        slot and still computes all the others.
        """
        properties = self.default_properties if properties is None else tuple(properties)
        check_properties(properties, self.properties, self.metadata.name)
        if errors not in ("raise", "return"):
            raise ValueError(f"errors must be 'raise' or 'return', got {errors!r}")
        if errors == "raise":
            converted = list(to_structures(structures, supported_numbers=self.atomic_numbers, max_atoms=max_atoms))
        else:
            converted = to_structures_or_errors(structures, supported_numbers=self.atomic_numbers, max_atoms=max_atoms)
        results: list[dict[str, Any]] = [
            {"error": item} if isinstance(item, StructureError) else None for item in converted
        ]  # type: ignore[misc]
        good = [i for i, item in enumerate(converted) if not isinstance(item, StructureError)]
        validated = [converted[i] for i in good]
        for batch_indices in batches_by_atoms(validated, max_atoms_per_batch):
            indices = [good[i] for i in batch_indices]
            batch = [converted[i] for i in indices]
            graph = build_graph(batch, self.cutoff, self.species, dtype=self.dtype, device=self.device)
            outputs = self(
                graph,
                compute_forces=not keys.NEED_FORCES.isdisjoint(properties),
                compute_stress=keys.STRESS in properties,
            )
            for i, per_system in zip(indices, split_results(outputs, graph), strict=True):
                results[i] = select_properties(per_system, properties)
        return results



class Potential(PotentialBase):
    """An encoder writing node features and heads reading them.

    With an ``energy`` head, ``forward(graph)`` returns ``energy [n_systems]`` eV, ``energies
    [n_atoms]`` eV, and on request ``forces [n_atoms, 3]`` eV/Å and ``stress``/``virial``
    ``[n_systems, 3, 3]``.  Crystal-tensor heads add their tensor per system
    (``dielectric_tensor``, ``piezoelectric_tensor``, ``elastic_tensor``; see :mod:`atomistic.keys`).
    """

    def __init__(self, encoder: torch.nn.Module, heads: dict[str, torch.nn.Module], metadata: PotentialMetadata):
        super().__init__()
        self.encoder = encoder
        self.heads = torch.nn.ModuleDict(heads)
        self.metadata = metadata
        self.species = SpeciesMap(encoder.config.species)
        self.cutoff = float(encoder.cutoff)
        for name, head in self.heads.items():
            for key in getattr(head, "requires", ()):
                if key not in (keys.NODE_FEATURES, keys.NODE_FEATURES_PER_LAYER):
                    raise ValueError(f"head '{name}' requires '{key}', which the encoder does not write")
            if hasattr(head, "irreps_in") and head.irreps_in != encoder.irreps_out:
                raise ValueError(f"head '{name}' expects {head.irreps_in}, encoder writes {encoder.irreps_out}")

    @property
    def has_energy(self) -> bool:
        return "energy" in self.heads

    @property
    def properties(self) -> tuple[str, ...]:
        """What :meth:`predict` can return for this model."""
        tensors = tuple(k for k in keys.TENSOR_KEYS if any(getattr(h, "output_key", None) == k for h in self.heads.values()))
        return (keys.ENERGY_PROPERTIES if self.has_energy else ()) + tensors

    @property
    def encoder_name(self) -> str:
        return self.encoder.name

    @property
    def species_cutoffs(self) -> tuple[float, ...] | None:
        """A cutoff (Å) per species, in species order, where the encoder sets one per element."""
        return getattr(self.encoder.config, "species_cutoffs", None)

    def pair_cutoffs(self) -> dict[tuple[int, int], float]:
        """The cutoff (Å) of each unordered pair of elements ``(Z_a, Z_b)``, ``Z_a <= Z_b``."""
        table = getattr(self.encoder.config, "pair_cutoffs", lambda: None)()
        numbers = self.atomic_numbers
        return {
            tuple(sorted((numbers[a], numbers[b]))): self.cutoff if table is None else float(table[a, b])
            for a in range(len(numbers))
            for b in range(a, len(numbers))
        }

    @property
    def has_parity(self) -> bool:
        """Whether the features carry parity (the model is then invariant under reflections too)."""
        return bool(getattr(self.encoder.config, "parity", True))

    @property
    def isolated_atom_is_reference(self) -> bool:
        """Whether a lone atom's energy is its element's E0 + shift (:meth:`reference_energy`)."""
        return self.has_energy and getattr(self.heads["energy"], "isolated_atom_is_reference", True)

    def reference_energy(self, atomic_number: int) -> float:
        """Energy of an isolated atom of this element (E0 + shift), eV."""
        head = self.heads["energy"]
        index = int(self.species.index(np.array([atomic_number]))[0])
        return float(head.e0s[index] + head.shift)

    def forward(
        self,
        graph: AtomicGraph,
        compute_forces: bool = True,
        compute_stress: bool = False,
        training: bool = False,
    ) -> dict[str, torch.Tensor]:
        compute_forces = compute_forces and self.has_energy
        compute_stress = compute_stress and self.has_energy
        with torch.set_grad_enabled(training or compute_forces or compute_stress or torch.is_grad_enabled()):
            graph, strain = attach_strain(graph, compute_forces, compute_stress)
            outputs = dict(self.encoder(graph))
            for head in self.heads.values():
                outputs.update(head(graph, outputs))
            results = {k: v for k, v in outputs.items() if k in (keys.ENERGY, keys.ATOMIC_ENERGIES, *keys.TENSOR_KEYS)}
            if self.has_energy:
                results.update(
                    energy_derivatives(
                        outputs[keys.ENERGY], graph, strain, compute_forces, compute_stress, create_graph=training
                    )
                )
        if not training:
            results = {k: v.detach() for k, v in results.items()}
        return results

def check_properties(requested: Sequence[str], available: Sequence[str], model: str = "this model") -> None:
    """``ValueError`` naming the properties that are unknown or that ``model`` cannot compute."""
    unknown = sorted(set(requested) - set(keys.PROPERTIES))
    if unknown:
        raise ValueError(f"unknown properties {unknown}; choose from {list(keys.PROPERTIES)}")
    missing = sorted(set(requested) - set(available))
    if missing:
        raise ValueError(f"model '{model}' does not provide {missing}; it provides {list(available)}")


def select_properties(per_system: dict[str, np.ndarray], properties: Sequence[str]) -> dict[str, Any]:
    """The requested properties of one system: energy as a float, stress dropped where the
    system has no cell volume (NaN)."""
    out: dict[str, Any] = {}
    for key in properties:
        if key not in per_system:
            continue
        value = per_system[key]
        if key == keys.ENERGY:
            out[key] = float(value)
        elif key == keys.STRESS and not np.isfinite(value).all():
            continue  # no volume: stress undefined
        else:
            out[key] = value
    return out
