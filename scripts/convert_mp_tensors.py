"""Convert the Materials Project tensor sets to the project's extxyz convention.

    python scripts/convert_mp_tensors.py SOURCE_DIR [-o data/tensors]

``SOURCE_DIR`` holds ``elastic_mp_cubic_100.json`` (column-oriented: ``structure``,
``formula_pretty``, ``elastic_tensor_voigt`` 6×6 GPa in MP order, …) and
``dielectric_mp_135.json`` (``records`` with ``material_id``, ``formula``, ``structure``,
``dielectric_tensor`` 3×3, ``bandgap_ev``).  Output: ``elastic_mp_cubic.extxyz`` and
``dielectric_mp.extxyz``, one frame per material with the tensor in ``info`` as
:func:`atomistic.voigt.tensor_label` reads it (elastic: 36 Voigt values, MP order, GPa;
dielectric: 9 values).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from ase.io import write
from pymatgen.core import Structure
from pymatgen.io.ase import AseAtomsAdaptor


def elastic_frames(path: Path):
    columns = json.loads(path.read_text())
    for key in sorted(columns["structure"], key=int):
        atoms = AseAtomsAdaptor.get_atoms(Structure.from_dict(columns["structure"][key]))
        atoms.info = {
            "formula": columns["formula_pretty"][key],
            "crystal_system": columns["crystal_system"][key],
            "elastic_tensor": np.asarray(columns["elastic_tensor_voigt"][key], dtype=float).reshape(-1),
        }
        atoms.arrays.pop("initial_magmoms", None)
        yield atoms


def dielectric_frames(path: Path):
    for record in json.loads(path.read_text())["records"]:
        atoms = AseAtomsAdaptor.get_atoms(Structure.from_dict(record["structure"]))
        atoms.info = {
            "material_id": record["material_id"],
            "formula": record["formula"],
            "bandgap_ev": float(record["bandgap_ev"]),
            "dielectric_tensor": np.asarray(record["dielectric_tensor"], dtype=float).reshape(-1),
        }
        atoms.arrays.pop("initial_magmoms", None)
        yield atoms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", type=Path)
    parser.add_argument("-o", "--output", type=Path, default=Path("data/tensors"))
    args = parser.parse_args()
    args.output.mkdir(parents=True, exist_ok=True)
    elastic = list(elastic_frames(args.source / "elastic_mp_cubic_100.json"))
    write(args.output / "elastic_mp_cubic.extxyz", elastic, format="extxyz")
    dielectric = list(dielectric_frames(args.source / "dielectric_mp_135.json"))
    write(args.output / "dielectric_mp.extxyz", dielectric, format="extxyz")
    print(f"{len(elastic)} elastic, {len(dielectric)} dielectric structures written to {args.output}")


if __name__ == "__main__":
    main()
