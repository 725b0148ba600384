"""Every data key that crosses a module boundary, with its shape and unit.

An ``AtomicGraph`` is a ``dict[str, Tensor]`` holding the atoms of all systems of a
batch concatenated.  Shapes use ``n_atoms`` (all systems together), ``n_edges`` and
``n_systems``.  Edge ``k`` connects a *centre* atom ``edge_index[0, k]`` (the one that
receives the message) with a *neighbour* atom ``edge_index[1, k]``; its vector is::

    edge_vectors[k] = positions[neighbour] - positions[centre] + edge_shift[k] @ cell[system]

No other module spells these strings; import the names from here.
"""

from __future__ import annotations

# --- inputs: per atom -------------------------------------------------------------------
POSITIONS = "positions"  # [n_atoms, 3] float, Å, Cartesian
ATOMIC_NUMBERS = "atomic_numbers"  # [n_atoms] int64, Z
SPECIES_INDEX = "species_index"  # [n_atoms] int64, index into the model's species list
SYSTEM_IDX = "system_idx"  # [n_atoms] int64, which system of the batch an atom belongs to

# --- inputs: per system -----------------------------------------------------------------
CELL = "cell"  # [n_systems, 3, 3] float, Å; rows are lattice vectors (zeros if not periodic)
PBC = "pbc"  # [n_systems, 3] bool, periodic along each lattice vector
N_ATOMS = "n_atoms"  # [n_systems] int64, atoms per system

# --- inputs: per edge -------------------------------------------------------------------
EDGE_INDEX = "edge_index"  # [2, n_edges] int64, (centre, neighbour)
EDGE_SHIFT = "edge_shift"  # [n_edges, 3] float, integer lattice translations of the neighbour

# --- derived inside the model -----------------------------------------------------------
EDGE_VECTORS = "edge_vectors"  # [n_edges, 3] float, Å, neighbour - centre (+ shift)
EDGE_LENGTHS = "edge_lengths"  # [n_edges] float, Å
STRAIN = "strain"  # [n_systems, 3, 3] float, dimensionless, symmetric displacement gradient
NODE_FEATURES = "node_features"  # [n_atoms, irreps_out.dim] last encoder layer
NODE_FEATURES_PER_LAYER = "node_features_per_layer"  # [n_atoms, n_layers, irreps_out.dim]

# --- outputs ----------------------------------------------------------------------------
ATOMIC_ENERGIES = "energies"  # [n_atoms] float, eV, per-atom energy contributions
ENERGY = "energy"  # [n_systems] float, eV, total energy
FORCES = "forces"  # [n_atoms, 3] float, eV/Å, -dE/dr
STRESS = "stress"  # [n_systems, 3, 3] float, eV/Å³, (1/V) dE/dstrain (ASE sign convention)
VIRIAL = "virial"  # [n_systems, 3, 3] float, eV, -dE/dstrain
# committee models only: RMS deviation of the members' forces from their mean force on each atom
FORCES_SPREAD = "forces_spread"  # [n_atoms] float, eV/Å
DIELECTRIC_TENSOR = "dielectric_tensor"  # [n_systems, 3, 3] float, unitless, eps_ij = eps_ji
PIEZOELECTRIC_TENSOR = "piezoelectric_tensor"  # [n_systems, 3, 3, 3] float, C/m², e_ijk = e_ikj
ELASTIC_TENSOR = "elastic_tensor"  # [n_systems, 3, 3, 3, 3] float, GPa, C_ijkl = C_jikl = C_ijlk = C_klij

PER_ATOM_KEYS = frozenset({POSITIONS, ATOMIC_NUMBERS, SPECIES_INDEX, SYSTEM_IDX, ATOMIC_ENERGIES, FORCES, FORCES_SPREAD})
TENSOR_KEYS = (DIELECTRIC_TENSOR, PIEZOELECTRIC_TENSOR, ELASTIC_TENSOR)  # crystal tensors, by order
TENSOR_SHAPES = {DIELECTRIC_TENSOR: (3, 3), PIEZOELECTRIC_TENSOR: (3, 3, 3), ELASTIC_TENSOR: (3, 3, 3, 3)}  # per system

PER_SYSTEM_KEYS = frozenset({CELL, PBC, N_ATOMS, ENERGY, STRESS, VIRIAL, *TENSOR_KEYS})
PER_EDGE_KEYS = frozenset({EDGE_SHIFT, EDGE_VECTORS, EDGE_LENGTHS})

# properties a caller may request from Potential.predict
ENERGY_PROPERTIES = (ENERGY, ATOMIC_ENERGIES, FORCES, STRESS)  # from an energy head
PROPERTIES = (*ENERGY_PROPERTIES, *TENSOR_KEYS, FORCES_SPREAD)
NEED_FORCES = frozenset({FORCES, FORCES_SPREAD})  # properties computed from the forces
