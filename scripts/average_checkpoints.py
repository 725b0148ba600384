"""Average the weights of several checkpoints of one architecture into a new checkpoint.

Uniform weight averaging (as stochastic weight averaging does over the ends of learning-rate
cycles): every floating-point tensor becomes the mean of the members' tensors, computed in
float64; the architecture (species, cutoff, widths), the E0s and every non-floating tensor must
be identical, or the script refuses and names the first difference. The result keeps the first
checkpoint's provenance (so ``scripts/write_model_card.py`` finds its validation split), adds
``averaged_from``, and drops the members' metrics: measure it afresh.

    python scripts/average_checkpoints.py /tmp/avg runs/organic_w128e/best runs/organic_w128f/best
    python scripts/write_model_card.py /tmp/avg --bar organic
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from atomistic.checkpoint import (
    CheckpointError,
    load_potential,
    read_manifest,
    resolve,
    save_checkpoint,
)


def average_checkpoints(members: list[str], output: Path) -> Path:
    """Write the uniform weight average of ``members`` (names or directories) to ``output``."""
    if len(members) < 2:
        raise CheckpointError("averaging needs at least two checkpoints")
    directories = [resolve(member) for member in members]
    manifests = [read_manifest(directory) for directory in directories]
    for directory, manifest in zip(directories[1:], manifests[1:], strict=True):
        if manifest["architecture"] != manifests[0]["architecture"]:
            raise CheckpointError(f"'{directory}' has a different architecture from '{directories[0]}'")
    potentials = [load_potential(directory, dtype=torch.float64, backend="reference") for directory in directories]
    states = [potential.state_dict() for potential in potentials]
    averaged = {}
    for key, first in states[0].items():
        tensors = [state[key] for state in states]
        if first.is_floating_point() and not key.endswith("e0s"):
            averaged[key] = torch.stack(tensors).mean(dim=0)
        elif any(not torch.equal(first, tensor) for tensor in tensors[1:]):
            raise CheckpointError(f"tensor '{key}' differs between the checkpoints and cannot be averaged")
        else:
            averaged[key] = first
    result = potentials[0]
    result.load_state_dict(averaged)
    provenance = dict(manifests[0].get("provenance", {}))
    provenance["averaged_from"] = [str(directory) for directory in directories]
    weights_dtype = getattr(torch, manifests[0].get("weights_dtype", "float32"))
    return save_checkpoint(result, output, provenance=provenance, metrics={}, weights_dtype=weights_dtype)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("output", type=Path, help="directory for the averaged checkpoint")
    parser.add_argument("members", nargs="+", help="checkpoint names or directories (two or more)")
    args = parser.parse_args(argv)
    try:
        written = average_checkpoints(args.members, args.output)
    except CheckpointError as err:
        raise SystemExit(f"error: {err}") from None
    print(json.dumps({"output": str(written), "members": args.members}))


if __name__ == "__main__":
    main()
