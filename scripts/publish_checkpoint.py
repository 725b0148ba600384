"""Publish a trained checkpoint as a shipped model: copy its weights and manifest into
``checkpoints/NAME`` under that name (provenance, metrics and weights unchanged).

    python scripts/publish_checkpoint.py runs/organic_v2/best organic
"""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("source", type=Path, help="checkpoint directory written by atomistic train")
    parser.add_argument("name", help="model name: the checkpoint goes to checkpoints/NAME")
    args = parser.parse_args()
    target = ROOT / "checkpoints" / args.name
    target.mkdir(parents=True, exist_ok=True)
    manifest = json.loads((args.source / "manifest.json").read_text())
    manifest["name"] = args.name
    shutil.copyfile(args.source / "weights.safetensors", target / "weights.safetensors")
    (target / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    print(f"published {args.source} as {target}")


if __name__ == "__main__":
    main()
