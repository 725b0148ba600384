"""The ship rule: does a candidate replace a shipped model? Read from their cards' float64 figures.

    python scripts/ship_rule.py SHIPPED CANDIDATE... [--held-out GROUP] [--transfer GROUP] [--json]

Every argument is a checkpoint directory (or shipped name) carded by ``scripts/write_model_card.py``,
which stores its measured figures in the manifest (``metrics.validation_by_group``, one entry per
card row). The rule is fixed before any candidate is measured:

1. among the candidates, the one with the lowest held-out force RMSE is chosen; the transfer set
   (for ``organic``, the whole 600 K acac file, which stands in for the unseen test set) never
   picks;
2. the chosen candidate ships only where both its held-out and its transfer force RMSE are lower
   than the shipped model's.

Prints each model's figures (energy RMSE in meV per structure, force RMSE in meV/Å) and the
decision; ``--json`` prints them as one JSON object instead.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

from write_model_card import TRANSFER_600K_LABEL  # noqa: E402

HELD_OUT = "acac"  # the organic card's held-out 300 K row (its source group: the data folder's name)
TRANSFER = TRANSFER_600K_LABEL  # the organic card's 600 K row


@dataclass(frozen=True)
class Figures:
    """One model's card figures: RMSE in meV per structure (energy) and meV/Å (forces)."""

    held_out_energy: float
    held_out_force: float
    transfer_energy: float
    transfer_force: float


@dataclass(frozen=True)
class Decision:
    chosen: str  # the candidate with the lowest held-out force RMSE
    ships: bool
    reason: str


def card_figures(checkpoint: str, held_out: str = HELD_OUT, transfer: str = TRANSFER) -> Figures:
    """The figures ``scripts/write_model_card.py`` stored in ``checkpoint``'s manifest."""
    from atomistic.checkpoint import CheckpointError, read_manifest, resolve

    try:
        manifest = read_manifest(resolve(checkpoint))
    except CheckpointError as error:
        raise SystemExit(f"{checkpoint}: {error}") from None
    groups = manifest.get("metrics", {}).get("validation_by_group")
    if not groups:
        raise SystemExit(f"{checkpoint}: not carded (no metrics.validation_by_group); run scripts/write_model_card.py on it first")
    missing = [g for g in (held_out, transfer) if g not in groups]
    if missing:
        raise SystemExit(f"{checkpoint}: its card has no row {missing[0]!r}; rows: {sorted(groups)}")
    h, t = groups[held_out], groups[transfer]
    return Figures(h["energy_rmse_mev_per_structure"], h["force_rmse_mev_per_ang"], t["energy_rmse_mev_per_structure"], t["force_rmse_mev_per_ang"])


def decide(shipped: Figures, candidates: dict[str, Figures]) -> Decision:
    """Apply the rule (module docstring) to the shipped model's and the candidates' figures."""
    if not candidates:
        raise ValueError("candidates: at least one is needed")
    chosen = min(candidates, key=lambda name: candidates[name].held_out_force)
    c = candidates[chosen]
    if c.held_out_force >= shipped.held_out_force:
        return Decision(chosen, False, f"held-out force RMSE {c.held_out_force:.3f} is not below the shipped {shipped.held_out_force:.3f} meV/Å")
    if c.transfer_force >= shipped.transfer_force:
        return Decision(chosen, False, f"transfer force RMSE {c.transfer_force:.3f} is not below the shipped {shipped.transfer_force:.3f} meV/Å")
    return Decision(chosen, True, f"both force RMSEs fall: held-out {shipped.held_out_force:.3f} -> {c.held_out_force:.3f}, transfer {shipped.transfer_force:.3f} -> {c.transfer_force:.3f} meV/Å")


def main(argv: list[str] | None = None) -> Decision:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("shipped", help="the shipped model (name or directory), carded")
    parser.add_argument("candidates", nargs="+", help="candidate checkpoints, carded")
    parser.add_argument("--held-out", default=HELD_OUT, help=f"the card row that chooses (default: {HELD_OUT!r})")
    parser.add_argument("--transfer", default=TRANSFER, help=f"the card row that must also fall (default: {TRANSFER!r})")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    shipped = card_figures(args.shipped, args.held_out, args.transfer)
    candidates = {name: card_figures(name, args.held_out, args.transfer) for name in args.candidates}
    decision = decide(shipped, candidates)
    if args.json:
        print(json.dumps({"shipped": {args.shipped: asdict(shipped)}, "candidates": {k: asdict(v) for k, v in candidates.items()}, **asdict(decision)}))
        return decision
    print(f"| model | held-out E / F ({args.held_out}) | transfer E / F ({args.transfer}) |")
    print("|---|---|---|")
    for name, f in {f"{args.shipped} (shipped)": shipped, **candidates}.items():
        print(f"| {name} | {f.held_out_energy:.3f} / {f.held_out_force:.3f} | {f.transfer_energy:.3f} / {f.transfer_force:.3f} |")
    print(f"chosen: {decision.chosen}; {'ships' if decision.ships else 'does not ship'}: {decision.reason}")
    return decision


if __name__ == "__main__":
    main()
