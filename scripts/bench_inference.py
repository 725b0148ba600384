"""Inference speed of atomistic against a peer, measured in the same run.

    python scripts/bench_inference.py sevennet [--device cpu|cuda] [--dtype float32] [--repeats 5]

Case ``sevennet``: atomistic's ``sevennet-0`` against ``sevenn``'s own ``SevenNetCalculator``
(same weights) on the same structures, energy + forces + stress, one structure per call as
an ASE calculator user would make them. On CUDA the peer also runs with its cuEquivariance
and FlashTP options when those are installed. Prints one line per structure with both
median wall times and the ratio peer/ours (> 1: atomistic is faster).
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _structures():
    from ase.build import bulk

    si = bulk("Si", "diamond", 5.43, cubic=True)
    nacl = bulk("NaCl", "rocksalt", 5.64, cubic=True)
    cases = {"Si 64": si.repeat(2), "Si 216": si.repeat(3), "NaCl 64": nacl.repeat(2), "NaCl 216": nacl.repeat(3)}
    for k, atoms in enumerate(cases.values()):
        atoms.rattle(0.03, seed=k)
    return cases


def _time(fn, repeats: int, device: str) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_sevennet(device: str, dtype: str, repeats: int) -> None:
    from sevenn.calculator import SevenNetCalculator

    from atomistic import AtomisticCalculator

    ours = AtomisticCalculator(model="sevennet-0", device=device, dtype=dtype)
    peers = {"sevenn": SevenNetCalculator("7net-0", device=device)}
    if device == "cuda":
        for label, kwargs in (("sevenn+cueq", {"enable_cueq": True}), ("sevenn+flash", {"enable_flash": True})):
            try:
                peers[label] = SevenNetCalculator("7net-0", device=device, **kwargs)
            except Exception as err:  # accelerator not installed: say so, measure the rest
                print(f"# {label} unavailable: {err}")
    print(f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, threads {torch.get_num_threads()}, device {device}, atomistic dtype {dtype}")
    print(f"{'structure':<10} {'ours (s)':>10} " + " ".join(f"{p + ' (s)':>16} {'ratio':>6}" for p in peers))

    def run(calc, atoms):
        calc.reset()  # ASE calculators cache results for unchanged atoms: force a new evaluation
        a = atoms.copy()
        a.calc = calc
        a.get_potential_energy()
        a.get_forces()
        a.get_stress()

    for name, atoms in _structures().items():
        t_ours = _time(lambda atoms=atoms: run(ours, atoms), repeats, device)
        row = f"{name:<10} {t_ours:>10.4f} "
        for calc in peers.values():
            t_peer = _time(lambda calc=calc, atoms=atoms: run(calc, atoms), repeats, device)
            row += f"{t_peer:>16.4f} {t_peer / t_ours:>6.2f} "
        print(row, flush=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("case", choices=["sevennet"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    if args.case == "sevennet":
        bench_sevennet(args.device, args.dtype, args.repeats)


if __name__ == "__main__":
    main()
