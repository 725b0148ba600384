"""The training structures a model fits worst, by the loss of a training config.

Each structure of the config's training split (or validation split with ``--valid``) is
scored alone with the config's loss weights (the first stage's, or ``--stage-two``): the
weighted energy / forces / stress terms and their total, as one optimisation step would see
them. The highest totals are printed with their ``source#frame``, group and description:
the place to look for mislabelled data, outliers, or what drives a loss spike.

    python scripts/worst_structures.py CONFIG CHECKPOINT [--top 15] [--valid] [--stage-two]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from atomistic import load_potential  # noqa: E402
from atomistic.data.graph import build_graph  # noqa: E402
from atomistic.training.config import load_config  # noqa: E402
from atomistic.training.losses import LossWeights, weighted_loss  # noqa: E402
from atomistic.training.run import prepare  # noqa: E402


def structure_losses(potential, structures, weights: LossWeights) -> list[dict[str, float]]:
    """Loss terms of each structure scored alone (weighted as in training: ``weight × term``)."""
    rows = []
    for structure in structures:
        graph = build_graph([structure], potential.cutoff, potential.species, dtype=potential.dtype, with_labels=True)
        outputs = potential(graph, compute_forces=True, compute_stress="stress" in structure.labels)
        terms = weighted_loss(outputs, graph, weights)
        rows.append({name: float(value.detach()) * (1.0 if name == "total" else getattr(weights, name)) for name, value in terms.items()})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config")
    parser.add_argument("checkpoint")
    parser.add_argument("--top", type=int, default=15)
    parser.add_argument("--valid", action="store_true", help="score the validation split instead")
    parser.add_argument("--stage-two", action="store_true", help="use the stage-two loss weights")
    args = parser.parse_args()
    config = load_config(args.config)
    train, valid, _ = prepare(config)
    structures = valid if args.valid else train
    loss = config.stage_two.weights(config.loss) if args.stage_two else config.loss
    weights = LossWeights(**dataclasses.asdict(loss))
    potential = load_potential(args.checkpoint, dtype=config.dtype)
    rows = structure_losses(potential, structures, weights)
    order = sorted(range(len(rows)), key=lambda i: -rows[i]["total"])
    mean_total = sum(r["total"] for r in rows) / len(rows)
    print(f"{len(rows)} structures, mean weighted loss {mean_total:.4g}; the {args.top} highest:")
    print("| structure | group | description | total | energy | forces | stress |")
    print("|---|---|---|---|---|---|---|")
    for i in order[: args.top]:
        s, r = structures[i], rows[i]
        name = f"{s.info.get('source', '?')}#{s.info.get('frame', i)}"
        print(
            f"| {name} | {s.info.get('group', '-')} | {s.info.get('description', '-')} | {r['total']:.4g} | "
            + " | ".join(f"{r[k]:.3g}" if k in r else "-" for k in ("energy", "forces", "stress"))
            + " |"
        )


if __name__ == "__main__":
    main()
