"""Training-step speed of the kernel backends, measured in the same run.

    python scripts/bench_train_step.py [--channels 16 32] [--backends e3nn reference cpu] [--repeats 3] [--profile] [--count-ops]

One optimisation step's forward and backward with an energy + forces + stress loss (forces
and stress come from a first derivative, the loss backward is the second) on four mlearn Si
structures (252 atoms), float32, for a MACE-class model of each channel count (l <= 2 edge
harmonics at 16 channels, l <= 3 above). Prints seconds per step per backend and the speed-up
of each backend over the first one; ``--profile`` adds the torch.profiler table of each
backend's step at the last channel count (where training time goes); ``--count-ops`` the
number of compute operators one step dispatches (views and metadata operators left out), in
the forward pass with its force and stress derivatives and in the loss backward, and the
commonest: on a GPU each is a kernel launch, and at small sizes their count, not their
arithmetic, sets the step time.
"""

from __future__ import annotations

import argparse
import collections
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def count_step_operators(potential, graph) -> tuple[dict[str, int], collections.Counter]:
    """Compute operators dispatched by one training-like step (see ``energy_forces_stress_step``):
    ``({"forward": n, "backward": n}, Counter of operator names over both)``. View operators
    (``OpOverload.is_view``) and a few pure-metadata ones are not counted."""
    from torch.utils._python_dispatch import TorchDispatchMode

    skipped = {"detach", "alias", "lift_fresh", "_unsafe_view", "empty", "empty_like"}

    class OperatorCount(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names: collections.Counter = collections.Counter()

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func.overloadpacket.__name__
            if not func.is_view and name not in skipped:
                self.names[name] += 1
            return func(*args, **(kwargs or {}))

    totals, names = {}, collections.Counter()
    with OperatorCount() as forward:
        out = potential(graph, compute_forces=True, compute_stress=True, training=True)
        loss = out["energy"].pow(2).sum() + out["forces"].pow(2).sum() + out["stress"].pow(2).sum()
    with OperatorCount() as backward:
        loss.backward()
    for phase, counter in (("forward", forward), ("backward", backward)):
        totals[phase] = sum(counter.names.values())
        names.update(counter.names)
    return totals, names


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--channels", type=int, nargs="+", default=[16, 32])
    parser.add_argument("--backends", nargs="+", default=["e3nn", "reference", "cpu"])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    parser.add_argument("--count-ops", action="store_true", help="count the operators one step dispatches")
    args = parser.parse_args()

    from _bench_common import energy_forces_stress_step, time_step

    from atomistic.data.datasets import read_mlearn_json
    from atomistic.data.graph import build_graph
    from atomistic.models.builders import build_potential, mace_architecture
    from atomistic.models.encoders.mace import MACEConfig

    structures = read_mlearn_json(ROOT / "data/mlearn/Si/training.json")[:4]
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {sum(len(s.numbers) for s in structures)} atoms per step")
    for channels in args.channels:
        config = MACEConfig(
            species=(3, 14, 32, 42), cutoff=5.0, max_ell=3 if channels > 16 else 2, hidden_lmax=1, channels=channels,
            num_layers=2, correlation=3, radial_hidden=(32, 32), avg_num_neighbors=20.0,
        )
        seconds = {}
        for backend in args.backends:
            torch.manual_seed(0)
            potential = build_potential(mace_architecture(config), dtype=torch.float32, backend=backend)
            graph = build_graph(structures, potential.cutoff, potential.species, dtype=torch.float32)
            step = energy_forces_stress_step(potential, graph)

            if args.count_ops:
                totals, names = count_step_operators(potential, graph)
                common = ", ".join(f"{name} {n}" for name, n in names.most_common(8))
                print(f"# operators per step: {backend}, {channels} channels: forward {totals['forward']}, "
                      f"loss backward {totals['backward']}; commonest: {common}", flush=True)
            seconds[backend], _ = time_step(step, "cpu", args.repeats)
            if args.profile and channels == args.channels[-1]:
                from torch.profiler import ProfilerActivity, profile

                with profile(activities=[ProfilerActivity.CPU]) as prof:
                    step()
                print(f"# profile: {backend}, {channels} channels")
                print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=10), flush=True)
        first = args.backends[0]
        row = "  ".join(f"{b} {t:.3f} s ({seconds[first] / t:.2f}x)" for b, t in seconds.items())
        print(f"channels {channels:>3}, l <= {config.max_ell}: {row}", flush=True)


if __name__ == "__main__":
    main()
