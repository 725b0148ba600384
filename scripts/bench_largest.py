"""Largest bulk Si supercell one energy + forces step fits in memory.

    python scripts/bench_largest.py [--device cuda] [--channels 128] [--hidden-lmax 2] [--dtype float32]

Doubles the number of atoms (diamond Si, rattled) until the step runs out of memory or
``--max-atoms`` is reached; prints atoms, step time, microseconds per atom and peak memory
for every size that ran, then the largest.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--backend", default="auto")
    parser.add_argument("--channels", type=int, default=128)
    parser.add_argument("--hidden-lmax", type=int, default=2)
    parser.add_argument("--max-atoms", type=int, default=2_000_000)
    args = parser.parse_args()

    from ase.build import bulk

    from atomistic.data import to_structures
    from atomistic.data.graph import build_graph
    from atomistic.models.builders import build_potential, mace_architecture
    from atomistic.models.encoders.mace import MACEConfig

    dtype = getattr(torch, args.dtype)
    config = MACEConfig(species=(14,), cutoff=5.0, max_ell=3, hidden_lmax=args.hidden_lmax, channels=args.channels, num_layers=2, correlation=3, avg_num_neighbors=20.0)
    potential = build_potential(mace_architecture(config), dtype=dtype, backend=args.backend, device=args.device)
    print(f"# backend {potential.metadata.backend}, {args.dtype}, channels {args.channels}, hidden L {args.hidden_lmax}")
    largest, reason = None, "reached --max-atoms"
    repeat = 4
    while True:
        atoms = bulk("Si", "diamond", 5.43, cubic=True).repeat(repeat)
        if len(atoms) > args.max_atoms:
            break
        atoms.rattle(0.02, seed=0)
        try:
            graph = build_graph(list(to_structures([atoms], max_atoms=args.max_atoms)), potential.cutoff, potential.species, dtype=dtype, device=args.device)
            if args.device.startswith("cuda"):
                torch.cuda.reset_peak_memory_stats()
                torch.cuda.synchronize()
            start = time.perf_counter()
            potential(graph, compute_forces=True)
            if args.device.startswith("cuda"):
                torch.cuda.synchronize()
            seconds = time.perf_counter() - start
            peak = torch.cuda.max_memory_allocated() / 2**30 if args.device.startswith("cuda") else float("nan")
        except torch.OutOfMemoryError:
            print(f"{len(atoms):>9} atoms: out of memory")
            reason = "the next size ran out of memory"
            break
        print(f"{len(atoms):>9} atoms: {seconds:8.3f} s/step, {1e6 * seconds / len(atoms):7.2f} us/atom/step, peak {peak:6.1f} GiB", flush=True)
        largest = len(atoms)
        del graph
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
        repeat = round(repeat * 2 ** (1 / 3))
    print(f"largest that ran: {largest} atoms ({reason})")


if __name__ == "__main__":
    main()
