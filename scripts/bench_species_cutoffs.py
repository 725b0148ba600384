"""Training-step cost of a cutoff per element, measured in the same run.

    python scripts/bench_species_cutoffs.py [--elements Li Si Ge Mo] [--repeats 3]

For four structures of each mlearn training file, one optimisation step's forward and backward
(energy + forces + stress loss) of the 64-channel MACE-class model of ``checkpoints/mlearn``
(float32, ``cpu`` backend) with three radial settings: one 5 Å cutoff, one 6 Å cutoff, and the
per-element cutoffs of ``scripts/configs/mlearn_v15.yaml`` (Li and Ge 6 Å, Si and Mo 5 Å; the
neighbour list at 6 Å, the longer Si and Mo edges dropped in the encoder). Prints the graph's
edge count, the seconds per step and the ratio to the 5 Å step.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SPECIES = (3, 14, 32, 42)
PER_ELEMENT = (6.0, 5.0, 6.0, 5.0)  # Li, Si, Ge, Mo (species order)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--elements", nargs="+", default=["Li", "Si", "Ge", "Mo"])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    from _bench_common import energy_forces_stress_step, time_step

    from atomistic.data.datasets import read_mlearn_json
    from atomistic.data.graph import build_graph
    from atomistic.models.builders import build_potential, mace_architecture
    from atomistic.models.encoders.mace import MACEConfig

    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, float32, cpu backend, 64 channels")
    settings = [("5 Å", 5.0, None), ("6 Å", 6.0, None), ("per element", 6.0, PER_ELEMENT)]
    for element in args.elements:
        structures = read_mlearn_json(ROOT / "data" / "mlearn" / element / "training.json")[:4]
        seconds = {}
        for label, cutoff, species_cutoffs in settings:
            config = MACEConfig(
                species=SPECIES, cutoff=cutoff, max_ell=3, hidden_lmax=1, channels=64, num_layers=2, correlation=3,
                radial_hidden=(64, 64), avg_num_neighbors=30.0, species_cutoffs=species_cutoffs,
            )
            torch.manual_seed(0)
            potential = build_potential(mace_architecture(config), dtype=torch.float32, backend="cpu")
            graph = build_graph(structures, potential.cutoff, potential.species, dtype=torch.float32)
            step = energy_forces_stress_step(potential, graph)

            seconds[label], _ = time_step(step, "cpu", args.repeats)
            print(f"{element}, {label}: {graph['edge_index'].shape[1]} edges in the graph, {seconds[label]:.3f} s per step "
                  f"({seconds[label] / seconds['5 Å']:.2f}x the 5 Å step)", flush=True)


if __name__ == "__main__":
    main()
