"""Train the small shipped ``mlearn-small`` model on the bundled mlearn data (Si, Ge, Li, Mo).

    python scripts/train_default.py --run-dir runs/default --out checkpoints/mlearn-small

Resumable: run the same command again to continue from ``run-dir/state.pt``.
The validation split (10 % of each element's training file, seeded) is never trained on.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atomistic.checkpoint import save_checkpoint  # noqa: E402
from atomistic.data.datasets import read_mlearn_json, seeded_split  # noqa: E402
from atomistic.models.builders import build_potential, mace_architecture  # noqa: E402
from atomistic.models.encoders.mace import MACEConfig  # noqa: E402
from atomistic.training.loop import Trainer, TrainingConfig  # noqa: E402
from atomistic.training.statistics import average_num_neighbors, force_rms, least_squares_e0s  # noqa: E402

ELEMENTS = {"Si": 14, "Ge": 32, "Li": 3, "Mo": 42}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", default=str(ROOT / "data" / "mlearn"))
    parser.add_argument("--run-dir", default=str(ROOT / "runs" / "default"))
    parser.add_argument("--out", default=str(ROOT / "checkpoints" / "mlearn-small"))
    parser.add_argument("--epochs", type=int, default=60)
    parser.add_argument("--max-hours", type=float, default=None)
    parser.add_argument("--channels", type=int, default=16)
    parser.add_argument("--max-ell", type=int, default=2)
    parser.add_argument("--correlation", type=int, default=3)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--cutoff", type=float, default=5.0)
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)

    train, valid = [], []
    for element in ELEMENTS:
        structures = read_mlearn_json(Path(args.data) / element / "training.json")
        t, v = seeded_split(structures, 0.1, args.seed)
        train += t
        valid += v
    species = tuple(sorted(ELEMENTS.values()))
    e0s = least_squares_e0s(train, species)
    avg_nn = average_num_neighbors(train, args.cutoff)
    scale = force_rms(train)
    config = MACEConfig(
        species=species,
        cutoff=args.cutoff,
        max_ell=args.max_ell,
        channels=args.channels,
        hidden_lmax=1,
        num_layers=args.layers,
        correlation=args.correlation,
        radial_hidden=(32, 32),
        avg_num_neighbors=round(avg_nn, 4),
    )
    potential = build_potential(mace_architecture(config), name="mlearn-small", dtype=torch.float32)
    head = potential.heads["energy"]
    head.e0s.copy_(torch.as_tensor(e0s, dtype=head.e0s.dtype))
    head.scale.fill_(scale)
    training = TrainingConfig(epochs=args.epochs, batch_size=args.batch_size, learning_rate=args.lr, seed=args.seed, max_hours=args.max_hours)
    trainer = Trainer(potential, train, valid, training, args.run_dir)
    if trainer.load_state():
        print(f"resumed at epoch {trainer.epoch}", flush=True)
    print(
        f"train {len(train)} / valid {len(valid)} structures; avg neighbours {avg_nn:.2f}; "
        f"force rms {scale:.3f} eV/Å; parameters {sum(p.numel() for p in potential.parameters())}",
        flush=True,
    )

    def on_best(model, metrics):
        provenance = {
            "training_data": "mlearn training sets (Zuo et al., J. Phys. Chem. A 124, 731 (2020)), BSD-3-Clause; "
            "Si, Ge, Li, Mo; DFT PBE (VASP)",
            "split": f"seeded (seed {args.seed}) 90/10 train/validation split of each element's training.json",
            "n_train": len(train),
            "n_valid": len(valid),
            "hyperparameters": {**vars(args), "training": dataclasses.asdict(training)},
            "epoch": trainer.epoch,
            "e0s_method": "least squares on training energies",
            "trained": time.strftime("%Y-%m-%d"),
        }
        save_checkpoint(model, args.out, provenance=provenance, metrics={"validation": metrics})
        print("  saved", args.out, json.dumps(metrics), flush=True)

    trainer.fit(on_best=on_best, log=lambda m: print(m, flush=True))


if __name__ == "__main__":
    main()
