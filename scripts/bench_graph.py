"""Time the data path in front of the model: ``atomistic.data.neighbor_list`` and
``build_graph`` (neighbour list, wrapping and centring, tensors) per structure, against ASE's
neighbour list on the same structures in the same run.

    python scripts/bench_graph.py [--repeats 300] [--json]

Structures: an acetylacetone molecule (15 atoms, no periodicity), diamond Si (216 atoms,
periodic) and a hexagonal Cu(111) slab (2 000 atoms, periodic in-plane), each searched at 5 Å.
Prints the median microseconds per call over ``--repeats`` calls and the ratio of ASE's time
to ours (above 1: ours is faster).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import ase.io
from ase.build import bulk, fcc111
from ase.neighborlist import neighbor_list as ase_neighbor_list

from atomistic.data import neighbor_list
from atomistic.data.convert import as_structure
from atomistic.data.graph import SpeciesMap, build_graph

ROOT = Path(__file__).resolve().parent.parent
CUTOFF = 5.0


def _structures():
    slab = fcc111("Cu", (20, 20, 5), vacuum=10.0)
    slab.pbc = (True, True, False)
    return {
        "acac (15 atoms, molecule)": ase.io.read(ROOT / "data/botnet/acac/train_300K.xyz", 0),
        "Si (216 atoms, periodic)": bulk("Si", "diamond", 5.43, cubic=True).repeat(3),
        "Cu(111) slab (2000 atoms)": slab,
    }


def _median_us(call, repeats: int) -> float:
    call()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = parser.parse_args()
    rows = []
    for name, atoms in _structures().items():
        structure = as_structure(atoms)
        species = SpeciesMap(sorted(set(atoms.numbers.tolist())))
        repeats = max(10, args.repeats // max(1, len(atoms) // 200))
        ours = _median_us(lambda s=structure: neighbor_list(s.positions, s.cell, s.pbc, CUTOFF), repeats)
        graph = _median_us(lambda s=structure, z=species: build_graph([s], CUTOFF, z), repeats)
        ase_us = _median_us(lambda a=atoms: ase_neighbor_list("ijS", a, CUTOFF), repeats)
        rows.append({"structure": name, "neighbor_list_us": ours, "build_graph_us": graph, "ase_neighbor_list_us": ase_us, "ase_over_ours": ase_us / ours})
    if args.json:
        print(json.dumps(rows, indent=1))
        return
    print("| structure | neighbor_list (µs) | build_graph (µs) | ASE neighbor_list (µs) | ASE / ours |")
    print("|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['structure']} | {r['neighbor_list_us']:.0f} | {r['build_graph_us']:.0f} | {r['ase_neighbor_list_us']:.0f} | {r['ase_over_ours']:.1f} |")


if __name__ == "__main__":
    main()
