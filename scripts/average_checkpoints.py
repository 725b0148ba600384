"""Average the weights of several checkpoints of one architecture into a new checkpoint.

Uniform weight averaging (as stochastic weight averaging does over the ends of learning-rate
cycles): every trained parameter becomes the mean of the members' values, computed in float64;
the architecture (species, cutoff, widths) and every buffer (what the data and architecture fix
rather than training: E0s, scale and shift, coupling coefficients, masks) must be identical, or
the script refuses and names the first difference. The result keeps the first
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
    result, others = potentials[0], potentials[1:]
    for key, buffer in result.named_buffers():
        if any(not torch.equal(buffer, other.get_buffer(key)) for other in others):
            raise CheckpointError(f"buffer '{key}' differs between the checkpoints and cannot be averaged")
    others_parameters = [dict(other.named_parameters()) for other in others]
    for key, parameter in result.named_parameters():
        parameter.copy_(torch.stack([parameter, *(named[key] for named in others_parameters)]).mean(dim=0))
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
