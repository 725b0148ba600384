"""Inference cost of trained checkpoints on the same structures, measured in the same run.

    python scripts/bench_checkpoints.py CHECKPOINT... --data FILE [--structures 64] [--repeats 3]

Loads each checkpoint (a shipped name such as ``organic`` or a directory) in float32, predicts
energy and forces for the first ``--structures`` structures of ``--data`` as one call of
``predict`` (after one warm-up call), and prints the median of ``--repeats`` wall times
(``_bench_common.time_step``), the structures per second, the peak memory growth and each
checkpoint's time as a ratio to the first's. Threads: torch's default (set ``OMP_NUM_THREADS``
to pin them).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))


def main(argv: list[str] | None = None) -> list[dict]:
    from _bench_common import time_step

    from atomistic.checkpoint import load_potential
    from atomistic.data.convert import read_structures

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", help="shipped names or checkpoint directories; the first is the reference")
    parser.add_argument("--data", required=True, help="extxyz / mlearn JSON file of structures the models support")
    parser.add_argument("--structures", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args(argv)
    structures = read_structures(args.data)[: args.structures]
    rows = []
    for name in args.checkpoints:
        potential = load_potential(name, dtype=torch.float32)
        seconds, peak_mb = time_step(lambda model=potential: model.predict(structures, properties=["energy", "forces"]), "cpu", args.repeats)
        rows.append({
            "checkpoint": name,
            "parameters": sum(p.numel() for p in potential.parameters()),
            "seconds": seconds,
            "peak_mb": peak_mb,
        })
    print(f"{len(structures)} structures of {args.data}, energy + forces, float32, {torch.get_num_threads()} threads")
    print("| checkpoint | parameters | median of repeats (s) | structures / s | peak memory growth (MiB) | time / first's |")
    print("|---|---|---|---|---|---|")
    for row in rows:
        row["ratio"] = row["seconds"] / rows[0]["seconds"]
        print(
            f"| {row['checkpoint']} | {row['parameters']} | {row['seconds']:.3f} | "
            f"{len(structures) / row['seconds']:.1f} | {row['peak_mb'] if row['peak_mb'] is None else round(row['peak_mb'])} | "
            f"{row['ratio']:.2f} |"
        )
    return rows


if __name__ == "__main__":
    main()
