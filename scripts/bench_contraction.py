"""Symmetric-contraction (product basis) speed of the kernel backends, measured in the same run.

    python scripts/bench_contraction.py [--channels 64] [--atoms 252] [--backends reference cpu] [--repeats 7]

For the product bases of a MACE-class model (l <= 3 atomic basis, correlation 3, into 0e + 1o
as in the first layer and into 0e as in a last layer), four species mixed over the atoms,
float32: the forward alone (no autograd), and a training-like pass — forward, the derivative
with respect to the atomic basis kept in the graph (forces), then the backward of a loss on
both (force loss). Prints the median milliseconds per backend and the speed-up of each backend
over the first one.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--atoms", type=int, default=252)
    parser.add_argument("--species", type=int, default=4)
    parser.add_argument("--backends", nargs="+", default=["reference", "cpu"])
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()

    from _bench_common import time_step

    from atomistic.kernels import SymmetricContractionSpec, make_symmetric_contraction

    c = args.channels
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {args.atoms} atoms, {c} channels, {args.species} species")
    for irreps_out in (f"{c}x0e+{c}x1o", f"{c}x0e"):
        spec = SymmetricContractionSpec(f"{c}x0e+{c}x1o+{c}x2e+{c}x3o", irreps_out, 3)
        generator = torch.Generator().manual_seed(0)
        basis = torch.randn(args.atoms, 16 * c, generator=generator).requires_grad_()
        species = torch.randint(0, args.species, (args.atoms,), generator=generator)
        weights = [torch.randn(args.species, spec.num_paths(o), c, generator=generator).requires_grad_() for o in (1, 2, 3)]
        results = {}
        for backend in args.backends:
            contraction = make_symmetric_contraction(spec, backend)

            def forward(contraction=contraction, basis=basis, species=species, weights=weights):
                with torch.no_grad():
                    contraction(basis, species, weights)

            def training(contraction=contraction, basis=basis, species=species, weights=weights):
                out = contraction(basis, species, weights)
                (grad,) = torch.autograd.grad(out.pow(2).sum(), basis, create_graph=True)
                (grad.pow(2).sum() + out.pow(2).sum()).backward()

            for name, step in (("forward", forward), ("training", training)):
                results[backend, name], _ = time_step(step, "cpu", args.repeats)
        for name in ("forward", "training"):
            first = results[args.backends[0], name]
            row = "  ".join(f"{b} {results[b, name] * 1e3:.1f} ms ({first / results[b, name]:.2f}x)" for b in args.backends)
            print(f"into {irreps_out}, {name}: {row}", flush=True)


if __name__ == "__main__":
    main()
