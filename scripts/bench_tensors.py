"""CEITNet (Cartesian) tensor heads against the spherical-harmonic (e3nn irreps) baseline on
the same encoder, data, split, seed and training budget, for orders 2, 3 and 4.

    python scripts/bench_tensors.py [--epochs 15] [--orders 2,3,4] [--max-train 600] [--pairs 1]

Data: order 2, the 135 Materials Project dielectric tensors (data/tensors/dielectric_mp.extxyz);
order 3, a known analytic polar tensor of random Al/Cu/Au cells (no real piezoelectric data is
reachable offline; atomistic.testing.analytic_piezo); order 4, the EMT alloy elastic tensors
(data/tensors/elastic_emt.extxyz).  Each head is trained with `atomistic train` on the same
seeded split and evaluated on the held-out part.

Accuracy: Fnorm (mean Frobenius norm of the error) and EwT 25/10/5 % on held-out structures.
Cost per structure: the head's forward time (encoder excluded, median of repeats, batches of
32 structures, 1 thread) and its training-activation memory (bytes of the tensors autograd
saves for the backward pass of head + loss, per structure) — a deterministic measure of the
memory a head adds.  Ratios are spherical / Cartesian (higher: Cartesian cheaper).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from ase.io import write

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atomistic import keys  # noqa: E402
from atomistic.checkpoint import load_potential  # noqa: E402
from atomistic.data import read_structures  # noqa: E402
from atomistic.data.datasets import seeded_split  # noqa: E402
from atomistic.data.graph import build_graph  # noqa: E402
from atomistic.testing import analytic_piezo_frames  # noqa: E402
from atomistic.training.config import config_from_dict  # noqa: E402
from atomistic.training.metrics import evaluate  # noqa: E402
from atomistic.training.run import train  # noqa: E402

ENCODER = {"cutoff": 5.0, "channels": 16, "max_ell": 2, "hidden_lmax": 0, "num_layers": 2, "correlation": 2, "radial_hidden": [32]}
HEAD = {"channels": 16, "hidden": 64}
PREFIX = {2: "dielectric", 3: "piezoelectric", 4: "elastic"}
KEY = {2: keys.DIELECTRIC_TENSOR, 3: keys.PIEZOELECTRIC_TENSOR, 4: keys.ELASTIC_TENSOR}


def datasets(order: int, workdir: Path, max_train: int) -> tuple[Path, Path]:
    """Write (train, test) extxyz files for one order; the split is seeded."""
    if order == 3:
        train_frames, test_frames = analytic_piezo_frames(min(max_train, 400), 0), analytic_piezo_frames(100, 10_000)
    else:
        path = ROOT / "data" / "tensors" / ("dielectric_mp.extxyz" if order == 2 else "elastic_emt.extxyz")
        structures = read_structures(path)
        train_set, test_set = seeded_split(structures, 0.15 if order == 2 else 0.1, seed=0)
        key = KEY[order]

        def frame(s):
            atoms = s.to_ase()
            atoms.info[key] = np.asarray(s.labels[key]).reshape(-1)
            return atoms

        train_set = train_set[:max_train]
        seen = {int(z) for s in train_set for z in s.numbers}  # a test structure with an unseen element is skipped
        train_frames, test_frames = [frame(s) for s in train_set], [frame(s) for s in test_set if set(s.numbers.tolist()) <= seen]
    train_path, test_path = workdir / f"order{order}_train.extxyz", workdir / f"order{order}_test.extxyz"
    write(train_path, train_frames)
    write(test_path, test_frames)
    return train_path, test_path


def train_head(order: int, basis: str, train_path: Path, workdir: Path, epochs: int, pairs: int = 1) -> tuple[Path, float]:
    name = f"order{order}-{basis}"
    head = {"basis": basis, **HEAD, **({"pairs": pairs} if basis == "cartesian" and order in (2, 4) else {})}
    config = config_from_dict(
        {
            "seed": 0,
            "dtype": "float32",
            "run_dir": str(workdir / "runs" / name),
            "output": str(workdir / name),
            "epochs": epochs,
            "batch_size": 16,
            "data": {"train": [str(train_path)], "valid_fraction": 0.1},
            "model": {**ENCODER, "energy_head": False, "tensor_heads": {KEY[order]: head}},
            "loss": {"tensors": 1.0, "kind": "mse"},
            "optimizer": {"learning_rate": 0.005, "ema_decay": 0.99},
            "schedule": {"kind": "cosine", "warmup_epochs": 2, "min_lr_ratio": 0.01},
            "early_stopping_patience": epochs,
        }
    )
    started = time.perf_counter()
    train(config, log=lambda *_: None)
    return workdir / name, time.perf_counter() - started


def head_cost(model_dir: Path, test_path: Path, repeats: int = 5) -> dict[str, float]:
    potential = load_potential(str(model_dir), dtype="float32", backend="reference")
    head = next(h for h in potential.heads.values() if getattr(h, "output_key", None) in keys.TENSOR_KEYS)
    structures = read_structures(test_path)[:32]
    graph = build_graph(structures, potential.cutoff, potential.species, dtype=torch.float32)
    with torch.no_grad():
        features = dict(potential.encoder(graph))
        head(graph, features)  # warm-up
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            head(graph, features)
            times.append(time.perf_counter() - start)
    saved = 0

    def pack(tensor):
        nonlocal saved
        saved += tensor.numel() * tensor.element_size()
        return tensor

    for p in head.parameters():
        p.requires_grad_(True)
    detached = {k: v.detach() for k, v in features.items()}
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        output = head(graph, detached)[head.output_key]
        (output**2).sum().backward()
    return {"head_ms_per_structure": 1000 * statistics.median(times) / len(structures), "head_activation_kb_per_structure": saved / 1024 / len(structures)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--orders", default="2,3,4")
    parser.add_argument("--max-train", type=int, default=600, help="training structures per order (order 2 has 115, order 3 is capped at 400)")
    parser.add_argument("--pairs", type=int, default=1, help="many-body products of the Cartesian order-2 and order-4 heads")
    parser.add_argument("--json", type=Path, default=None, help="also write the results here")
    args = parser.parse_args()
    torch.set_num_threads(1)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-tensors-") as tmp:
        workdir = Path(tmp)
        for order in (int(o) for o in args.orders.split(",")):
            train_path, test_path = datasets(order, workdir, args.max_train)
            for basis in ("cartesian", "spherical"):
                model_dir, seconds = train_head(order, basis, train_path, workdir, args.epochs, args.pairs)
                metrics = evaluate(load_potential(str(model_dir), dtype="float64", backend="reference"), read_structures(test_path)).summary()
                prefix = PREFIX[order]
                fnorm = next(v for k, v in metrics.items() if k.startswith(f"{prefix}_fnorm"))
                row = {
                    "order": order, "basis": basis, "train_s": seconds, "n_test": metrics["n_structures"], "fnorm": fnorm,
                    **{f"ewt{t}": metrics[f"{prefix}_ewt{t}"] for t in (25, 10, 5)},
                    **head_cost(model_dir, test_path),
                    "parameters": sum(p.numel() for p in load_potential(str(model_dir)).parameters()),
                }
                if order == 4:
                    row["bulk_mae_gpa"], row["shear_mae_gpa"] = metrics["bulk_modulus_vrh_mae_gpa"], metrics["shear_modulus_vrh_mae_gpa"]
                rows.append(row)
                print(json.dumps(row), flush=True)
    print(f"\n{'order':>5} {'head':>10} {'Fnorm':>9} {'EwT25':>6} {'EwT10':>6} {'EwT5':>6} {'ms/struct':>10} {'act. kB/struct':>15} {'params':>8} {'train s':>8}")
    for r in rows:
        print(
            f"{r['order']:>5} {r['basis']:>10} {r['fnorm']:>9.4g} {r['ewt25']:>6.1%} {r['ewt10']:>6.1%} {r['ewt5']:>6.1%} "
            f"{r['head_ms_per_structure']:>10.3f} {r['head_activation_kb_per_structure']:>15.1f} {r['parameters']:>8} {r['train_s']:>8.0f}"
        )
    print("\nspherical / Cartesian (cost ratios: higher means the Cartesian head is cheaper)")
    for order in sorted({r["order"] for r in rows}):
        cart, sph = (next(r for r in rows if r["order"] == order and r["basis"] == b) for b in ("cartesian", "spherical"))
        print(
            f"order {order}: time {sph['head_ms_per_structure'] / cart['head_ms_per_structure']:.2f}x, "
            f"activation memory {sph['head_activation_kb_per_structure'] / cart['head_activation_kb_per_structure']:.2f}x, "
            f"Fnorm spherical/Cartesian {sph['fnorm'] / cart['fnorm']:.2f}"
        )
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
