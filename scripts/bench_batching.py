"""What merging structures into one forward pass can give a model, in-process: the ceiling on
the server's micro-batching gain, without HTTP.

    python scripts/bench_batching.py [--model default] [--batches 1,4,16,64] [--threads 1] [--dtype float64]

For each batch size, the time per structure of a forward + forces pass over batches of rattled
8-atom Si cells (graph construction and result splitting included, as in the server's batch
worker; median of repeats), once with glibc's default allocator behaviour and once with
``atomistic.runtime.retain_freed_memory`` (each in its own subprocess, since the setting is
process-wide). Prints ms/structure and the ratio to one structure per pass, and the memory
each mode holds: peak and end-of-run resident set after 40 passes over random batch sizes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def resident_mb() -> float:
    """Current resident set of this process, MB (Linux)."""
    return int(Path("/proc/self/status").read_text().split("VmRSS:")[1].split()[0]) / 1024


def measure(model: str, batches: list[int], threads: int, dtype: str, retain: bool, repeats: int) -> dict:
    """In this process: ``ms_per_structure`` for each batch size, then ``peak_mb`` and
    ``final_rss_mb`` (resident memory) after 40 passes over random batch sizes from ``batches``."""
    sys.path.insert(0, str(ROOT))
    import random
    import resource

    import torch
    from ase.build import bulk

    from atomistic import keys
    from atomistic.checkpoint import load_potential
    from atomistic.data import to_structures
    from atomistic.data.graph import build_graph, split_results
    from atomistic.runtime import retain_freed_memory

    torch.set_num_threads(threads)
    if retain:
        retain_freed_memory()
    potential = load_potential(model, dtype=dtype, backend="auto")
    cells = []
    for k in range(max(batches)):
        atoms = bulk("Si", "diamond", 5.43, cubic=True)
        atoms.rattle(0.03, seed=k)
        cells.append(atoms)
    structures = list(to_structures(cells))

    def one_pass(batch):
        graph = build_graph(batch, potential.cutoff, potential.species, dtype=potential.dtype, device=potential.device)
        outputs = potential(graph, compute_forces=True, compute_stress=False)
        return [float(r[keys.ENERGY]) for r in split_results(outputs, graph)]

    ms_per_structure = {}
    for size in batches:
        batch = structures[:size]
        one_pass(batch)  # warm-up at this size
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            one_pass(batch)
            times.append(time.perf_counter() - start)
        ms_per_structure[size] = 1000 * statistics.median(times) / size
    draw = random.Random(0)
    for _ in range(40):
        one_pass(structures[: draw.choice(batches)])
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"ms_per_structure": ms_per_structure, "peak_mb": peak_mb, "final_rss_mb": resident_mb()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="default")
    parser.add_argument("--batches", default="1,4,16,64")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--dtype", default="float64")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--child", choices=["default", "retain"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    if args.child:
        result = measure(args.model, batches, args.threads, args.dtype, args.child == "retain", args.repeats)
        print(json.dumps(result))
        return
    modes = {"default": "glibc default", "retain": "retain_freed_memory"}
    measured, ms = {}, {}
    for mode in modes:
        command = [sys.executable, __file__, "--child", mode, *sys.argv[1:]]
        completed = subprocess.run(command, capture_output=True, text=True, check=True)
        measured[mode] = json.loads(completed.stdout.strip().splitlines()[-1])
        ms[mode] = {int(size): value for size, value in measured[mode]["ms_per_structure"].items()}  # JSON keys are strings
    print(f"model {args.model}, {args.dtype}, {args.threads} thread(s), 8-atom Si cells, forward + forces")
    print(f"{'allocator':>26} " + " ".join(f"{f'batch {b}':>10}" for b in batches) + "   (ms per structure)")
    for mode, label in modes.items():
        print(f"{label:>26} " + " ".join(f"{ms[mode][b]:>10.2f}" for b in batches))
    for mode, label in modes.items():
        ceiling = ", ".join(f"batch {b}: {ms[mode][batches[0]] / ms[mode][b]:.2f}x" for b in batches[1:])
        print(f"gain over batch {batches[0]} ({label}): {ceiling}")
    print("retain_freed_memory / default time: " + ", ".join(f"batch {b}: {ms['retain'][b] / ms['default'][b]:.2f}" for b in batches))
    for mode, label in modes.items():
        print(f"memory after 40 random-size passes ({label}): peak {measured[mode]['peak_mb']:.0f} MB, resident at the end {measured[mode]['final_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
