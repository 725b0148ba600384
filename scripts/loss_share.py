"""Expected share of each training file in a config's force loss: the mean, over random batches
of the config's size, of the file's summed atom weights in a batch over the batch's normaliser
(``loss.weight_normalisation``: ``batch`` divides by the batch's summed atom weights, ``dataset``
by its atom count times the training set's mean atom weight), as a fraction of all files'.

    python scripts/loss_share.py scripts/configs/organic_w128_restart.yaml [--epochs 100]

The training set is the config's own (``prepare``: its split taken out, ``max_structures`` and
``info_weights`` applied); each structure's forces weight is the one the loss reads.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atomistic.training.config import load_config  # noqa: E402
from atomistic.training.run import prepare  # noqa: E402


def force_loss_shares(atoms: np.ndarray, weight: np.ndarray, file: np.ndarray, batch_size: int, normalisation: str,
                      epochs: int, seed: int = 0) -> np.ndarray:
    """Expected share of each file in the force loss, ``[n_files]``, from each training structure's
    atom count, forces weight and file index (``[n_structures]`` each)."""
    n_files = int(file.max()) + 1
    mean_weight = (atoms * weight).sum() / atoms.sum()
    rng = np.random.default_rng(seed)
    totals = np.zeros(n_files)
    for _ in range(epochs):
        order = rng.permutation(len(atoms))
        for start in range(0, len(order) - batch_size + 1, batch_size):
            batch = order[start:start + batch_size]
            mass = atoms[batch] * weight[batch]
            normaliser = mass.sum() if normalisation == "batch" else atoms[batch].sum() * mean_weight
            totals += np.bincount(file[batch], weights=mass, minlength=n_files) / normaliser
    return totals / totals.sum()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("config")
    parser.add_argument("--epochs", type=int, default=100, help="random epochs averaged over (default: %(default)s)")
    args = parser.parse_args(argv)
    config = load_config(args.config)
    train, _, _ = prepare(config)
    paths = [entry.path for entry in config.data.train]
    file = np.array([paths.index(s.info["source"]) for s in train])
    atoms = np.array([len(s) for s in train], dtype=float)
    weight = np.array([float(s.info.get("loss_weight_forces", s.info.get("loss_weight", 1.0))) for s in train])
    shares = force_loss_shares(atoms, weight, file, config.batch_size, config.loss.weight_normalisation, args.epochs)
    print(f"| file | training structures | atoms | share of the force loss ({config.loss.weight_normalisation}) |")
    print("|---|---|---|---|")
    for i, (path, share) in enumerate(zip(paths, shares, strict=True)):
        print(f"| `{path}` | {(file == i).sum()} | {int(atoms[file == i].sum())} | {100 * share:.1f} % |")


if __name__ == "__main__":
    main()
