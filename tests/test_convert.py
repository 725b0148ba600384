from __future__ import annotations

import json

import numpy as np
import pytest
from ase import Atoms
from ase.build import bulk, molecule
from ase.io import write
from pymatgen.core import Lattice, Molecule
from pymatgen.core import Structure as PmgStructure

from atomistic.data import (
    StructureError,
    UnsupportedFormatError,
    parse_structures,
    read_structures,
    to_structures,
)
from atomistic.data.datasets import (
    elastic_stress_work_mismatch,
    mlearn_virial_to_stress,
    read_mlearn_json,
    seeded_split,
    stratified_split,
)
from atomistic.units import KBAR_TO_EV_PER_ANG3

from .paths import DATA


def test_ase_pymatgen_dict_agree():
    atoms = bulk("Si", "diamond", 5.43)
    pmg = PmgStructure(Lattice(atoms.cell.array), ["Si", "Si"], atoms.positions, coords_are_cartesian=True)
    as_dict = {"symbols": ["Si", "Si"], "positions": atoms.positions.tolist(), "cell": atoms.cell.array.tolist(), "pbc": True}
    as_numbers = {"numbers": [14, 14], "positions": atoms.positions, "cell": atoms.cell.array, "pbc": [True] * 3}
    structures = to_structures([atoms, pmg, as_dict, as_numbers, pmg.as_dict()])
    for s in structures[1:]:
        np.testing.assert_allclose(s.positions, structures[0].positions, atol=1e-12)
        np.testing.assert_allclose(s.cell, structures[0].cell, atol=1e-12)
        assert s.pbc.all() and (s.numbers == 14).all()


def test_pymatgen_molecule_is_not_periodic():
    mol = Molecule(["O", "H", "H"], [[0, 0, 0], [0.96, 0, 0], [-0.24, 0.93, 0]])
    (s,) = to_structures(mol)
    assert not s.pbc.any() and np.all(s.cell == 0)
    assert s.numbers.tolist() == [8, 1, 1]


def _error(inputs, **kwargs) -> StructureError:
    with pytest.raises(StructureError) as info:
        to_structures(inputs, **kwargs)
    return info.value


def test_errors_name_index_field_and_reason():
    good = bulk("Si", "diamond", 5.43)
    err = _error([good, {"symbols": ["Si", "Xx"], "positions": [[0, 0, 0], [1, 1, 1]]}])
    assert (err.index, err.field) == (1, "symbols") and "unknown element symbol 'Xx'" in str(err)
    assert str(err).startswith("structure 1: field 'symbols'")

    err = _error({"numbers": [14, 200], "positions": [[0, 0, 0], [1, 1, 1]]})
    assert err.field == "numbers" and "unknown element" in err.reason

    err = _error([good, good, {"numbers": [1, 1], "positions": [[0, 0, 0], [np.nan, 0, 0]]}])
    assert (err.index, err.field) == (2, "positions") and "NaN" in err.reason

    err = _error({"numbers": [1, 1], "positions": [[0, 0, 0]]})
    assert err.field == "positions" and "shape" in err.reason

    err = _error({"numbers": [1], "positions": [[0, 0, 0]], "cell": [[1, 0, 0], [2, 0, 0], [0, 0, 1]], "pbc": True})
    assert err.field == "cell" and "singular" in err.reason

    err = _error({"numbers": [1, 1], "positions": [[0, 0, 0], [0.05, 0, 0]]})
    assert err.field == "positions" and "0.0500 Å apart" in err.reason

    err = _error({"numbers": [1], "positions": [[0, 0, 0]], "cell": np.eye(3) * 0.05, "pbc": True})
    assert err.field == "positions" and "periodic image" in err.reason

    err = _error(good.repeat((2, 2, 2)), max_atoms=10)
    assert err.field == "numbers" and "exceeds the limit of 10" in err.reason

    err = _error({"numbers": [14, 79], "positions": [[0, 0, 0], [2, 0, 0]]}, supported_numbers=[14, 32])
    assert err.field == "numbers" and "Au" in err.reason and "not supported" in err.reason

    err = _error(42)
    assert err.field == "structure" and "unsupported input type" in err.reason


def test_slab_with_zero_vacuum_vector_is_accepted():
    (s,) = to_structures({"numbers": [14], "positions": [[0, 0, 0]], "cell": [[3, 0, 0], [0, 3, 0], [0, 0, 0]], "pbc": [True, True, False]})
    assert s.pbc.tolist() == [True, True, False]


@pytest.mark.parametrize("fmt,name", [("extxyz", "a.extxyz"), ("xyz", "a.xyz"), ("cif", "a.cif"), ("vasp", "POSCAR")])
def test_file_formats(tmp_path, fmt, name):
    atoms = bulk("Ge", "diamond", 5.76, cubic=True)
    atoms.rattle(0.01, seed=1)
    if fmt == "xyz":
        atoms = molecule("CH4")
    path = tmp_path / name
    write(path, atoms, format=fmt)
    (s,) = read_structures(path)
    if atoms.pbc.all():  # CIF and POSCAR wrap atoms into the cell: compare modulo lattice vectors
        frac = np.linalg.solve(atoms.cell.array.T, (s.positions - atoms.positions).T).T
        np.testing.assert_allclose(frac - np.round(frac), 0.0, atol=1e-5)
    else:
        np.testing.assert_allclose(s.positions, atoms.positions, atol=1e-5)
    assert s.numbers.tolist() == atoms.numbers.tolist()
    assert s.pbc.tolist() == atoms.pbc.tolist()
    assert to_structures(path)[0].numbers.tolist() == atoms.numbers.tolist()


def test_extxyz_labels_are_read(tmp_path):
    from ase.calculators.singlepoint import SinglePointCalculator

    atoms = bulk("Si", "diamond", 5.43)
    forces = np.arange(6.0).reshape(2, 3)
    atoms.calc = SinglePointCalculator(atoms, energy=-10.5, forces=forces, stress=np.arange(6.0))
    write(tmp_path / "l.extxyz", atoms)
    (s,) = read_structures(tmp_path / "l.extxyz")
    assert s.labels["energy"] == -10.5
    np.testing.assert_allclose(s.labels["forces"], forces)
    assert s.labels["stress"][1, 2] == 3.0 and s.labels["stress"][0, 1] == 5.0


def test_unknown_format_and_bad_text():
    with pytest.raises(UnsupportedFormatError, match="cannot tell the format"):
        read_structures(__file__)
    with pytest.raises(UnsupportedFormatError, match="could not parse"):
        parse_structures("this is not a cif", "cif")


_DEGENERATE_CIF = """data_x
_cell_length_a 0
_cell_length_b 0
_cell_length_c 0
_cell_angle_alpha 90
_cell_angle_beta 90
_cell_angle_gamma 90
loop_
_atom_site_label
_atom_site_fract_x
_atom_site_fract_y
_atom_site_fract_z
Si 0 0 0
"""


def test_texts_that_misstate_their_contents_are_refused_before_reading():
    """An xyz header declaring 10^9 atoms (ASE spent 38 s finding out), a negative count, a CIF
    whose cell is degenerate (ASE read it as one isolated, non-periodic atom) and a POSCAR whose
    counts exceed its lines."""
    for text in ("1000000000\n\nSi 0 0 0\n", "2\n\nSi 0 0 0\nSi 1 1 1\n7\n\nSi 0 0 0\n", "-5\n\nSi 0 0 0\n"):
        with pytest.raises(UnsupportedFormatError, match=r"frame \d declares -?\d+ atoms but the text holds \d more lines"):
            parse_structures(text, "xyz")
    with pytest.raises(UnsupportedFormatError, match=r"block 0 has a degenerate cell \(lengths 0, 0, 0 Å\)"):
        parse_structures(_DEGENERATE_CIF, "cif")
    poscar = "Si\n1\n5 0 0\n0 5 0\n0 0 5\nSi\n{}\nDirect\n0 0 0\n"  # ASE allocated 16 GB for a count of 10^9
    with pytest.raises(UnsupportedFormatError, match=r"the atom counts \[1000000000\] add up to 1000000000 but the text holds 1 more lines"):
        parse_structures(poscar.format(1_000_000_000), "poscar")
    assert len(parse_structures(poscar.format(1), "poscar")[0]) == 1
    assert len(parse_structures("2\n\nSi 0 0 0\nSi 1 1 1\n1\n\nSi 0 0 0\n\n", "xyz")) == 2  # counts that fit, a trailing blank line


def test_mlearn_json(tmp_path):
    structures = read_mlearn_json(DATA / "mlearn" / "Mo" / "training.json")
    assert len(structures) > 100
    s = structures[0]
    assert {"energy", "forces", "stress"} <= set(s.labels)
    assert s.labels["forces"].shape == (len(s), 3)
    record = json.loads((DATA / "mlearn" / "Mo" / "training.json").read_text())[0]
    sample = tmp_path / "sample.json"
    sample.write_text(json.dumps([record]))
    (again,) = to_structures(sample)
    np.testing.assert_allclose(again.positions, s.positions)


def test_mlearn_reader_keeps_the_md_temperature():
    structures = read_mlearn_json(DATA / "mlearn" / "Mo" / "training.json")
    hot = [s for s in structures if s.info.get("temperature_k") == 6000]
    assert hot and all("at 6000 K" in s.info["description"] for s in hot)
    assert {s.info.get("temperature_k") for s in structures if s.info["group"] == "Elastic"} == {None}


def _strata(structures, keys=("group", "temperature_k")):
    counts: dict = {}
    for s in structures:
        key = tuple(s.info.get(k) for k in keys)
        counts[key] = counts.get(key, 0) + 1
    return counts


@pytest.mark.parametrize("fraction", [0.1, 0.25])
def test_stratified_split_takes_each_kinds_share(fraction):
    structures = read_mlearn_json(DATA / "mlearn" / "Mo" / "training.json")
    train, valid = stratified_split(structures, fraction, 0, ["group", "temperature_k"])
    assert len(valid) == round(fraction * len(structures)) and len(train) + len(valid) == len(structures)
    assert {id(s) for s in train}.isdisjoint(id(s) for s in valid)
    in_file, in_valid = _strata(structures), _strata(valid)
    for kind, n in in_file.items():
        assert abs(in_valid.get(kind, 0) - fraction * n) < 1, kind
    # seeded: the same split again, another with another seed; both keep the file's order
    again = stratified_split(structures, fraction, 0, ["group", "temperature_k"])[1]
    assert [s.info["frame"] for s in again] == [s.info["frame"] for s in valid]
    assert [s.info["frame"] for s in valid] == sorted(s.info["frame"] for s in valid)
    other = stratified_split(structures, fraction, 1, ["group", "temperature_k"])[1]
    assert [s.info["frame"] for s in other] != [s.info["frame"] for s in valid]


def test_stratified_split_without_keys_is_the_seeded_split():
    structures = read_mlearn_json(DATA / "mlearn" / "Li" / "training.json")[:30]
    plain, stratified = seeded_split(structures, 0.2, 4), stratified_split(structures, 0.2, 4, [])
    assert [[s.info["frame"] for s in part] for part in plain] == [[s.info["frame"] for s in part] for part in stratified]


def test_stratified_split_of_a_tiny_file_still_validates_on_one_structure():
    structures = read_mlearn_json(DATA / "mlearn" / "Li" / "training.json")[:4]
    train, valid = stratified_split(structures, 0.1, 0, ["group"])
    assert len(valid) == 1 and len(train) == 3


def test_mlearn_stress_convention():
    # VASP order xx yy zz xy yz xz, compressive positive → ASE (tensile positive) 3x3
    stress = mlearn_virial_to_stress([1, 2, 3, 4, 5, 6])
    expected = -KBAR_TO_EV_PER_ANG3 * np.array([[1, 4, 6], [4, 2, 5], [6, 5, 3]])
    np.testing.assert_allclose(stress, expected)
    # LAMMPS order xx yy zz xy xz yz
    stress = mlearn_virial_to_stress([1, 2, 3, 4, 5, 6], "lammps")
    expected = -KBAR_TO_EV_PER_ANG3 * np.array([[1, 4, 5], [4, 2, 6], [5, 6, 3]])
    np.testing.assert_allclose(stress, expected)
    with pytest.raises(ValueError, match="shear_order"):
        mlearn_virial_to_stress([1, 2, 3, 4, 5, 6], "voigt")


@pytest.mark.parametrize("element", ["Mo", "Si", "Ge", "Li"])
def test_mlearn_stress_is_the_strain_derivative_of_the_energy(element):
    """Along each Elastic strain series the DFT energy change equals the stress work V σ̄:Δε
    only with every shear component in its place (Mo's file lists them in another order than
    Si's and Ge's Elastic cells)."""
    structures = read_mlearn_json(DATA / "mlearn" / element / "training.json")
    mismatch = elastic_stress_work_mismatch([s for s in structures if s.info.get("group") == "Elastic"])
    assert len(mismatch) >= 15
    # the trapezoid rule over 2-4 % strain steps leaves < 1 meV/atom; a misplaced shear, 5-20
    assert np.mean(mismatch) < 1e-3, f"{element}: mean |ΔE - work| {np.mean(mismatch) * 1000:.2f} meV/atom"


def test_mlearn_stress_sign_follows_volume():
    """Among the strained-bulk Si cells, larger volumes must be more tensile (ASE: higher trace)."""
    structures = [s for s in read_mlearn_json(DATA / "mlearn" / "Si" / "training.json") if s.info.get("group") == "Elastic"]
    volumes = np.array([s.volume / len(s) for s in structures])
    pressure_trace = np.array([np.trace(s.labels["stress"]) for s in structures])
    assert np.corrcoef(volumes, pressure_trace)[0, 1] > 0.5


def test_ase_atoms_roundtrip():
    atoms = bulk("Li", "bcc", 3.44, cubic=True)
    (s,) = to_structures(atoms)
    back = s.to_ase()
    assert isinstance(back, Atoms)
    np.testing.assert_allclose(back.positions, atoms.positions)
