"""Readers for labelled training and benchmark data.

The mlearn benchmark (Zuo et al., J. Phys. Chem. A 124, 731 (2020)) stores a JSON list of
records ``{structure: pymatgen dict, outputs: {energy, forces, virial_stress}, group, ...}``
with total energies in eV, forces in eV/Å and ``virial_stress`` in kbar with VASP's sign
(compressed cells are positive).  Here stress is converted to eV/Å³ with ASE's sign
(compressed cells are negative).

The published files store the three shear components in two orders: VASP's (xy, yz, zx) and
LAMMPS's (xy, xz, yz), depending on element and configuration group (see
:data:`MLEARN_LAMMPS_SHEAR_ORDER`); the reader puts every record's shear stress in its place.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from atomistic.data.convert import (
    LabelKeys,
    Structure,
    StructureError,
    as_structure,
    read_structures,
)
from atomistic.units import KBAR_TO_EV_PER_ANG3

# (element, group) of the published mlearn records whose ``virial_stress`` lists the shear
# components in LAMMPS's order (xy, xz, yz); the others use VASP's (xy, yz, zx). Found from the
# data: across each Elastic strain series the energy change must equal the stress work
# V σ:Δε (Mo matches only in LAMMPS order, Si and Ge only in VASP order), and a model fitted
# to the physics of the whole set predicts the AIMD and vacancy shear stress of Mo, Si and Ge
# in LAMMPS order and Li's in VASP order (scripts/check_mlearn_stress_order.py; docs/benchmarks.md).
# Surface slabs carry almost no shear stress, so their order cannot be told; Mo's follows
# the rest of the Mo file.
MLEARN_LAMMPS_SHEAR_ORDER = frozenset(
    {
        ("Mo", "AIMD-NVT"), ("Mo", "Elastic"), ("Mo", "Vacancy"), ("Mo", "Surface"),
        ("Si", "AIMD-NVT"), ("Si", "Vacancy"),
        ("Ge", "AIMD-NVT"), ("Ge", "Vacancy"),
    }
)
SHEAR_ORDERS = ("vasp", "lammps")  # xy yz zx | xy xz yz after xx yy zz


def mlearn_virial_to_stress(virial_stress_kbar: Sequence[float], shear_order: str = "vasp") -> np.ndarray:
    """mlearn ``virial_stress`` (kbar, VASP sign; xx, yy, zz, then the shears in ``shear_order``:
    ``vasp`` xy, yz, zx or ``lammps`` xy, xz, yz) → ASE stress [3, 3] eV/Å³."""
    if shear_order not in SHEAR_ORDERS:
        raise ValueError(f"shear_order: must be one of {SHEAR_ORDERS}, got {shear_order!r}")
    xx, yy, zz, xy, second, third = (float(v) for v in virial_stress_kbar)
    yz, xz = (second, third) if shear_order == "vasp" else (third, second)
    vasp = np.array([[xx, xy, xz], [xy, yy, yz], [xz, yz, zz]])
    return -vasp * KBAR_TO_EV_PER_ANG3


def mlearn_shear_order(record: dict[str, Any]) -> str:
    """The shear order of one mlearn record's ``virial_stress`` (``vasp`` unless its element and
    group are in :data:`MLEARN_LAMMPS_SHEAR_ORDER`)."""
    return "lammps" if (record.get("element"), record.get("group")) in MLEARN_LAMMPS_SHEAR_ORDER else "vasp"


_ELASTIC_STRAIN = re.compile(r"mode (\d+), strain (-?[\d.]+)")


def elastic_stress_work_mismatch(structures: Sequence[Structure]) -> list[float]:
    """|ΔE − V σ̄:Δε| (eV/atom) for each pair of neighbouring strains of each mlearn Elastic
    series (records described as "... mode N, strain X"; others are skipped): the DFT energy
    change against the work of the mean stress σ̄ of the two cells over the symmetric strain Δε
    between them, a consistency check of the stress labels (shape and sign)."""
    series: dict[int, list[tuple[float, Structure]]] = {}
    for s in structures:
        match = _ELASTIC_STRAIN.search(str(s.info.get("description", "")))
        if match and "stress" in s.labels and "energy" in s.labels:
            series.setdefault(int(match.group(1)), []).append((float(match.group(2)), s))
    mismatch = []
    for items in series.values():
        items.sort(key=lambda item: item[0])
        for (_, a), (_, b) in zip(items, items[1:], strict=False):
            deformation = np.linalg.solve(a.cell, b.cell)  # b.cell = a.cell @ F (lattice vectors as rows)
            strain = 0.5 * (deformation + deformation.T) - np.eye(3)
            volume = 0.5 * (abs(np.linalg.det(a.cell)) + abs(np.linalg.det(b.cell)))
            work = volume * (0.5 * (a.labels["stress"] + b.labels["stress"]) * strain).sum()
            mismatch.append(abs(b.labels["energy"] - a.labels["energy"] - work) / len(a.numbers))
    return mismatch


# "... AIMD NVT simulation at 3000 K": the temperature of the MD run a snapshot was taken from
_MD_TEMPERATURE = re.compile(r"\bat (\d+) K\b")


def structures_from_mlearn_records(records: list[dict[str, Any]], source: str = "<mlearn>") -> list[Structure]:
    if not isinstance(records, list):
        raise StructureError(None, "records", "mlearn JSON must be a list of records")
    structures = []
    for i, record in enumerate(records):
        if "structure" not in record:
            raise StructureError(i, "structure", "mlearn record has no 'structure'")
        base = as_structure(record["structure"], i)
        outputs = record.get("outputs", {}) or {}
        labels: dict[str, Any] = {}
        if outputs.get("energy") is not None:
            labels["energy"] = float(outputs["energy"])
        if outputs.get("forces") is not None:
            labels["forces"] = np.asarray(outputs["forces"], dtype=np.float64).reshape(-1, 3)
        if outputs.get("virial_stress") is not None:
            labels["stress"] = mlearn_virial_to_stress(outputs["virial_stress"], mlearn_shear_order(record))
        info = {"source": source, "frame": i}
        for key in ("group", "tag", "description"):
            if isinstance(record.get(key), str):
                info[key] = record[key]
        temperature = _MD_TEMPERATURE.search(str(record.get("description", "")))
        if temperature:
            info["temperature_k"] = int(temperature.group(1))
        structures.append(dataclasses.replace(base, labels=labels, info=info))
    return structures


def read_mlearn_json(path: str | os.PathLike) -> list[Structure]:
    """Read an mlearn ``training.json``/``test.json`` file into labelled structures."""
    with open(path) as fh:
        records = json.load(fh)
    return structures_from_mlearn_records(records, source=str(path))


def read_labelled(
    paths: str | os.PathLike | Sequence[str | os.PathLike], label_keys: LabelKeys | None = None
) -> list[Structure]:
    """Read labelled structures from one or more extxyz / mlearn JSON files (``label_keys``:
    the names of an extxyz file's labels, see :class:`~atomistic.data.convert.LabelKeys`)."""
    if isinstance(paths, str | os.PathLike):
        paths = [paths]
    structures: list[Structure] = []
    for path in paths:
        structures.extend(read_structures(Path(path), label_keys=label_keys))
    return structures


def seeded_split(structures: Sequence[Structure], fraction: float, seed: int) -> tuple[list[Structure], list[Structure]]:
    """(train, valid): a fresh ``default_rng(seed)`` permutation; the first
    ``max(1, round(fraction * n))`` structures are the validation set."""
    order = np.random.default_rng(seed).permutation(len(structures))
    n_valid = max(1, round(fraction * len(structures)))
    return [structures[i] for i in order[n_valid:]], [structures[i] for i in order[:n_valid]]


def stratified_split(
    structures: Sequence[Structure], fraction: float, seed: int, keys: Sequence[str]
) -> tuple[list[Structure], list[Structure]]:
    """(train, valid) with each stratum (structures sharing the values of ``info[key]`` for every
    key in ``keys``; a missing key is its own value) represented in the validation set in
    proportion to its size: ``max(1, round(fraction * n))`` structures in all, each stratum's
    ``fraction * n_stratum`` rounded by largest remainder (ties to the earlier stratum).
    Strata are visited in sorted order of their values, each shuffled by one
    ``default_rng(seed)``; both splits keep the file's order. A small random split of a file
    that mixes kinds of configuration (ground states, strained cells, hot liquids) can hold
    twice a kind's share of the file or none of it; this one holds each kind's share."""
    if not keys:
        return seeded_split(structures, fraction, seed)
    strata: dict[tuple[str, ...], list[int]] = {}
    for i, s in enumerate(structures):
        strata.setdefault(tuple(repr(s.info.get(key)) for key in keys), []).append(i)
    names = sorted(strata)
    n_valid = max(1, round(fraction * len(structures)))
    quotas = [fraction * len(strata[name]) for name in names]
    counts = [int(q) for q in quotas]
    by_remainder = sorted(range(len(names)), key=lambda k: (-(quotas[k] - counts[k]), k))
    for k in by_remainder[: n_valid - sum(counts)]:
        counts[k] += 1
    rng = np.random.default_rng(seed)
    valid_indices: set[int] = set()
    for name, count in zip(names, counts, strict=True):
        members = strata[name]
        valid_indices.update(members[j] for j in rng.permutation(len(members))[:count])
    return (
        [s for i, s in enumerate(structures) if i not in valid_indices],
        [s for i, s in enumerate(structures) if i in valid_indices],
    )
