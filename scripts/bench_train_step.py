"""Time of one training step (forward, forces and stress with a graph for the force loss,
loss backward) per kernel backend, in one run: what training speed each backend gives.

    python scripts/bench_train_step.py [--backends reference,cpu] [--steps 4] [--profile]

Model: the `mlearn_v2` MACE-class architecture (32 channels, l ≤ 3 edge harmonics, correlation
3, 2 layers), float32, 1 thread; batches of 4 mlearn Si training structures (as in training).
Prints the median step time per backend and its ratio to the first backend; `--profile` adds
the torch.profiler table of the first backend's step (where training time goes).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atomistic import keys  # noqa: E402
from atomistic.data import read_structures  # noqa: E402
from atomistic.data.graph import build_graph  # noqa: E402
from atomistic.models.builders import build_potential, mace_architecture  # noqa: E402
from atomistic.models.encoders.mace import MACEConfig  # noqa: E402

CONFIG = {"cutoff": 5.0, "channels": 32, "max_ell": 3, "hidden_lmax": 1, "num_layers": 2, "correlation": 3, "radial_hidden": [64, 64]}


def step(potential, batch) -> None:
    outputs = potential(batch, compute_forces=True, compute_stress=True, training=True)
    loss = outputs[keys.ENERGY].pow(2).sum() + outputs[keys.FORCES].pow(2).sum() + outputs[keys.STRESS].pow(2).sum()
    loss.backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="reference,cpu")
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    torch.set_num_threads(1)
    structures = read_structures(ROOT / "data" / "mlearn" / "Si" / "training.json")[: 4 * (args.steps + 1)]
    config = MACEConfig(species=[3, 14, 32, 42], avg_num_neighbors=25.6, **CONFIG)
    medians = {}
    for backend in args.backends.split(","):
        torch.manual_seed(0)
        potential = build_potential(mace_architecture(config), dtype=torch.float32, backend=backend)
        potential.train()
        batches = [build_graph(structures[4 * k : 4 * k + 4], potential.cutoff, potential.species, dtype=torch.float32) for k in range(args.steps + 1)]
        step(potential, batches[0])  # warm-up
        times = []
        for batch in batches[1:]:
            start = time.perf_counter()
            step(potential, batch)
            times.append(time.perf_counter() - start)
        medians[backend] = statistics.median(times)
        print(f"{backend:>10}: {medians[backend]:.3f} s per step (batches of 4 Si structures, {batches[1][keys.POSITIONS].shape[0]} atoms)", flush=True)
        if args.profile and len(medians) == 1:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU]) as prof:
                step(potential, batches[1])
            print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=12))
    first = next(iter(medians))
    for backend, seconds in medians.items():
        print(f"{first} / {backend}: {medians[first] / seconds:.2f}x")


if __name__ == "__main__":
    main()
