"""Publish a committee of checkpoints as one shipped model, ``checkpoints/NAME``: its members'
manifests and weights copied into ``checkpoints/NAME/members/`` (``atomistic.checkpoint.
save_committee``) and their licence files (``LICENSE*``) alongside. The committee predicts the
members' weighted mean, and ``forces_spread``, the members' disagreement.

Members trained by ``atomistic train`` must share one validation split (the same data files,
seed, ``valid_fraction`` and ``stratify_by``): otherwise one member's training set would hold
another's validation structures, and the committee's held-out errors would not be held out.
Members must cover the same elements (publish a fine-tuned universal model with
``scripts/publish_checkpoint.py --species`` first).

    python scripts/publish_committee.py mlearn checkpoints/mlearn-mace checkpoints/mlearn-sevennet
    python scripts/publish_committee.py mlearn A B --weights 2 1
    python scripts/publish_committee.py organic A B --weigh-by-validation

``--weigh-by-validation`` weighs each member by the inverse square of its held-out force RMSE
(``metrics.validation.force_rmse_ev_per_ang`` of its manifest, as ``scripts/write_model_card.py``
measures it on the shared split): the weights that minimise the variance of a mean of unbiased,
independent estimates. Members' errors are never fully independent, so this is a rule fixed in
advance, not an optimum; it keeps a less accurate member's share small without choosing weights
by their test errors.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atomistic.checkpoint import CheckpointError, save_committee  # noqa: E402
from atomistic.training.config import config_from_dict  # noqa: E402
from atomistic.training.run import validation_split_mismatches  # noqa: E402


def validation_weights(members: list[Path], manifests: list[dict], parser: argparse.ArgumentParser) -> list[float]:
    """Per member, 1 / (held-out force RMSE)², normalised to sum to 1."""
    inverse = []
    for member, manifest in zip(members, manifests, strict=True):
        rmse = manifest.get("metrics", {}).get("validation", {}).get("force_rmse_ev_per_ang")
        if not isinstance(rmse, (int, float)) or not rmse > 0:
            parser.error(f"{member}: its manifest has no held-out force RMSE (metrics.validation.force_rmse_ev_per_ang); card it first")
        inverse.append(1.0 / rmse**2)
    return [round(w / sum(inverse), 4) for w in inverse]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="model name: the committee goes to checkpoints/NAME")
    parser.add_argument("members", nargs="+", type=Path, help="member checkpoint directories")
    weighting = parser.add_mutually_exclusive_group()
    weighting.add_argument("--weights", nargs="+", type=float, help="one positive weight per member (default: equal)")
    weighting.add_argument(
        "--weigh-by-validation",
        action="store_true",
        help="weights proportional to 1 / (held-out force RMSE)² of each member's manifest",
    )
    parser.add_argument("--checkpoints", type=Path, default=ROOT / "checkpoints", help="where NAME goes")
    args = parser.parse_args(argv)
    if len(args.members) < 2:
        parser.error("a committee needs at least two members")
    manifests = []
    for member in args.members:
        if not (member / "manifest.json").is_file():
            parser.error(f"{member}: no manifest.json (not a checkpoint directory)")
        manifests.append(json.loads((member / "manifest.json").read_text()))
    trained = {
        str(member): config_from_dict(m["provenance"]["config"])
        for member, m in zip(args.members, manifests, strict=True)
        if "config" in m.get("provenance", {})
    }
    if validation_split_mismatches(trained):
        parser.error(f"members trained on different validation splits: {', '.join(trained)} (data, seed, valid_fraction or stratify_by differ)")
    if args.weigh_by_validation:
        args.weights = validation_weights(args.members, manifests, parser)
        print("weights from the held-out force RMSE:", ", ".join(f"{m.name} {w:.4f}" for m, w in zip(args.members, args.weights, strict=True)))
    target = args.checkpoints / args.name
    try:
        save_committee(
            args.members,
            target,
            name=args.name,
            weights=args.weights,
            provenance={"committee_of": [str(member) for member in args.members]},
        )
    except (CheckpointError, ValueError) as error:
        sys.exit(f"publish_committee: {error}")
    for member in args.members:
        for licence in sorted(member.glob("LICENSE*")):
            shutil.copyfile(licence, target / licence.name)
    print(f"published the committee of {', '.join(map(str, args.members))} as {target}")


if __name__ == "__main__":
    main()
