"""Energy head: per-atom readout of the invariant node features, per-element reference
energies E0, scale and shift."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from e3nn import o3

from atomistic import keys
from atomistic.data.graph import AtomicGraph


def reference_plus_network(e0s: torch.Tensor, network: torch.Tensor) -> torch.Tensor:
    """Per-atom energies ``[n_atoms]`` (eV, float64) from the isolated-atom references
    ``e0s [n_atoms]`` (float64, :class:`Float64References`) and the network's part
    ``network [n_atoms]`` (the model's dtype).

    The references are hundreds to thousands of eV per atom (C −1027, O −2038 eV in the
    acetylacetone DFT) and a molecule's total thousands (−9391 eV), where float32 values are
    spaced ~1 meV apart; the network's part is a few eV. Adding and summing in float64 keeps
    a float32 model's totals exact to the network's own precision; forces and stress stay in
    the model's dtype."""
    return e0s.to(torch.float64) + network.to(torch.float64)


FLOAT64_BUFFERS = ("e0s",)  # buffers kept and saved in float64 whatever the model's dtype


class Float64References(torch.nn.Module):
    """Keeps the ``FLOAT64_BUFFERS`` (``e0s``: per-species isolated-atom energies, eV) in float64
    when the module is cast to another dtype (``.to(torch.float32)``, ``.float()``): float32
    would round C's −1027 eV by up to 0.06 meV and a molecule's reference by ~1 meV. Devices
    still follow."""

    def _apply(self, fn, recurse=True):
        kept = {name: getattr(self, name) for name in FLOAT64_BUFFERS}
        super()._apply(fn, recurse)
        for name, value in kept.items():
            setattr(self, name, value.to(device=self.scale.device))
        return self


def sum_per_system(atomic_energies: torch.Tensor, graph: AtomicGraph) -> torch.Tensor:
    """``[n_atoms]`` per-atom energies (eV) → ``[n_systems]`` total energies (eV)."""
    n_systems = graph[keys.N_ATOMS].shape[0]
    energy = torch.zeros(n_systems, dtype=atomic_energies.dtype, device=atomic_energies.device)
    return energy.index_add(0, graph[keys.SYSTEM_IDX], atomic_energies)


class EnergyHead(Float64References):
    """``E_i = E0[z_i] + shift + scale[z_i] · ε_i`` and ``E = Σ_i E_i`` per system.

    ``ε_i`` is a linear readout of the scalar (``0e``) features of every encoder layer plus a
    small MLP on the last layer's scalars; neither has biases, so an atom without
    neighbours (zero features) has ``E_i = E0[z_i] + shift``.

    Reads: ``node_features_per_layer [n_atoms, n_layers, irreps_in.dim]``.
    Writes: ``energies [n_atoms]`` eV, ``energy [n_systems]`` eV, both float64 (see
    :func:`reference_plus_network`).
    """

    name = "energy"
    requires = (keys.NODE_FEATURES_PER_LAYER,)
    isolated_atom_is_reference = True

    def __init__(
        self,
        irreps_in: o3.Irreps,
        num_layers: int,
        num_species: int,
        e0s: Sequence[float] | None = None,
        scale: float | Sequence[float] = 1.0,
        shift: float = 0.0,
        mlp_hidden: int = 16,
    ):
        super().__init__()
        self.irreps_in = o3.Irreps(irreps_in)
        self.num_layers = int(num_layers)
        self.mlp_hidden = int(mlp_hidden)
        scalar_slices = [sl for (mul, ir), sl in zip(self.irreps_in, self.irreps_in.slices(), strict=True) if ir == o3.Irrep("0e")]
        if not scalar_slices:
            raise ValueError(f"EnergyHead needs scalar (0e) node features, got {self.irreps_in}")
        self.register_buffer(
            "scalar_index", torch.cat([torch.arange(sl.start, sl.stop) for sl in scalar_slices]), persistent=False
        )
        num_scalars = int(self.scalar_index.numel())
        self.linear_readout = torch.nn.Linear(num_scalars * self.num_layers, 1, bias=False)
        torch.nn.init.normal_(self.linear_readout.weight, std=(num_scalars * self.num_layers) ** -0.5)
        self.mlp_readout = torch.nn.Sequential(
            torch.nn.Linear(num_scalars, self.mlp_hidden, bias=False),
            torch.nn.SiLU(),
            torch.nn.Linear(self.mlp_hidden, 1, bias=False),
        )
        e0s = torch.zeros(num_species, dtype=torch.float64) if e0s is None else torch.as_tensor(list(e0s), dtype=torch.float64)
        if e0s.shape != (num_species,):
            raise ValueError(f"e0s needs one value per species ({num_species}), got {tuple(e0s.shape)}")
        self.register_buffer("e0s", e0s)  # float64 always (Float64References)
        # per-species scale of the readout, eV: one value for all (the data's force RMS) or
        # each element's own
        scale = torch.as_tensor(scale, dtype=torch.float64).expand(num_species).clone()
        self.register_buffer("scale", scale.to(torch.get_default_dtype()))
        self.register_buffer("shift", torch.tensor(float(shift)))

    def config(self) -> dict[str, Any]:
        return {"mlp_hidden": self.mlp_hidden}

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        # checkpoints written before the scale was per species hold one value for all
        key = prefix + "scale"
        if key in state_dict and state_dict[key].dim() == 0:
            state_dict[key] = state_dict[key].expand(self.scale.shape).clone()
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def forward(self, graph: AtomicGraph, outputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        features = outputs[keys.NODE_FEATURES_PER_LAYER]  # [n_atoms, n_layers, dim]
        scalars = features[:, :, self.scalar_index]  # [n_atoms, n_layers, n_scalars]
        readout = self.linear_readout(scalars.reshape(scalars.shape[0], -1)) + self.mlp_readout(scalars[:, -1])
        species = graph[keys.SPECIES_INDEX]
        atomic_energies = reference_plus_network(self.e0s[species], self.shift + self.scale[species] * readout.squeeze(-1))
        return {keys.ATOMIC_ENERGIES: atomic_energies, keys.ENERGY: sum_per_system(atomic_energies, graph)}


class LinearEnergyHead(Float64References):
    """NequIP/SevenNet energy head: two linear maps of the last layer's features to a scalar
    ``ε_i``, then per-species scale and shift: ``E_i = shift[z_i] + scale[z_i] · ε_i``.

    An atom without neighbours keeps non-zero features (the self-connection path), so its
    energy is not ``shift[z]``: ``isolated_atom_is_reference`` is False.

    Reads: ``node_features [n_atoms, irreps_in.dim]``.
    Writes: ``energies [n_atoms]`` eV, ``energy [n_systems]`` eV, both float64 (see
    :func:`reference_plus_network`).
    """

    name = "energy"
    requires = (keys.NODE_FEATURES,)
    isolated_atom_is_reference = False

    def __init__(self, irreps_in: o3.Irreps, num_species: int, hidden: int | None = None):
        super().__init__()
        self.irreps_in = o3.Irreps(irreps_in)
        self.hidden = int(hidden if hidden is not None else self.irreps_in.dim // 2)
        self.readout_hidden = o3.Linear(self.irreps_in, o3.Irreps(f"{self.hidden}x0e"))
        self.readout_out = o3.Linear(o3.Irreps(f"{self.hidden}x0e"), o3.Irreps("1x0e"))
        self.register_buffer("e0s", torch.zeros(num_species, dtype=torch.float64))  # per-species shift, eV
        self.register_buffer("scale", torch.ones(num_species))  # per-species scale, eV
        self.register_buffer("shift", torch.tensor(0.0))  # global shift (kept 0), eV

    def config(self) -> dict[str, Any]:
        return {"type": "linear", "hidden": self.hidden}

    def forward(self, graph: AtomicGraph, outputs: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
        readout = self.readout_out(self.readout_hidden(outputs[keys.NODE_FEATURES])).squeeze(-1)
        species = graph[keys.SPECIES_INDEX]
        atomic_energies = reference_plus_network(self.e0s[species], self.shift + self.scale[species] * readout)
        return {keys.ATOMIC_ENERGIES: atomic_energies, keys.ENERGY: sum_per_system(atomic_energies, graph)}
