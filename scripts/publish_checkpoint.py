"""Publish a trained checkpoint as a shipped model: copy its weights and manifest into
``checkpoints/NAME`` under that name (provenance, metrics and weights unchanged), with the
licence files (``LICENSE*``) of the checkpoint it was fine-tuned from.

``--species`` keeps only those elements (``atomistic.training.transfer.restrict_species``,
exact on them): a universal model fine-tuned on a few elements then refuses the others,
whose predictions the fine-tune changed without measuring them.

    python scripts/publish_checkpoint.py runs/organic_v2/best organic
    python scripts/publish_checkpoint.py runs/mlearn_s7/best mlearn --species Li Si Ge Mo
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source", type=Path, help="checkpoint directory written by atomistic train")
    parser.add_argument("name", help="model name: the checkpoint goes to checkpoints/NAME")
    parser.add_argument("--species", nargs="+", help="keep only these elements (symbols)")
    args = parser.parse_args()
    target = ROOT / "checkpoints" / args.name
    target.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((args.source / "manifest.json").read_text())
    for licence in inherited_licences(manifest):  # a fine-tune carries its ancestors' licence terms
        shutil.copyfile(licence, target / licence.name)
    if args.species:
        restrict(args.source, target, args.name, args.species)
    else:
        manifest["name"] = args.name
        shutil.copyfile(args.source / "weights.safetensors", target / "weights.safetensors")
        (target / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"published {args.source} as {target}")


def inherited_licences(manifest: dict) -> list[Path]:
    """The licence files (``LICENSE*``) of every checkpoint up the ``--init`` chain of
    ``manifest`` (a restart of a fine-tune of SevenNet-0 inherits SevenNet-0's), as far as the
    chain's directories still exist here."""
    sys.path.insert(0, str(ROOT))
    from atomistic.checkpoint import resolve_recorded

    licences, seen = {}, set()
    init = manifest.get("provenance", {}).get("init")
    while init and init not in seen:
        seen.add(init)
        directory = resolve_recorded(init, ROOT)  # a model name or a path, as --init resolves it
        if directory is None or not directory.is_dir():
            break
        for licence in sorted(directory.glob("LICENSE*")):
            licences.setdefault(licence.name, licence)
        parent = directory / "manifest.json"
        init = json.loads(parent.read_text()).get("provenance", {}).get("init") if parent.is_file() else None
    return list(licences.values())


def restrict(source: Path, target: Path, name: str, symbols: list[str]) -> None:
    """Write ``source`` restricted to the elements ``symbols`` into ``target``."""
    import torch
    from ase.data import atomic_numbers

    sys.path.insert(0, str(ROOT))
    from atomistic.checkpoint import load_potential, save_checkpoint
    from atomistic.training.transfer import restrict_species

    unknown = [s for s in symbols if s not in atomic_numbers]
    if unknown:
        sys.exit(f"--species: not an element: {unknown[0]!r}")
    potential = load_potential(source, dtype=torch.float64)
    kept_from = [int(z) for z in potential.atomic_numbers]
    try:
        restricted = restrict_species(potential, [atomic_numbers[s] for s in symbols])
    except ValueError as error:
        sys.exit(f"--species: {error}")
    restricted.metadata.name = name
    provenance = {**potential.metadata.provenance, "species_restricted_from": kept_from}
    save_checkpoint(restricted, target, provenance=provenance, metrics=potential.metadata.metrics)


if __name__ == "__main__":
    main()
