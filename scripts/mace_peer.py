"""Peer worker of ``bench_inference.py mace``: runs inside the mace-torch virtualenv (which
pins its own e3nn) and never imports atomistic.

    python scripts/mace_peer.py SPEC.json

SPEC holds ``hyperparameters`` (atomistic MACEConfig field names), ``structures`` (an extxyz
path; each frame's ``info["case"]`` names its case), ``dtype``, ``device``, ``repeats`` and
``cueq`` (use mace-torch's cuEquivariance kernels).  Prints one JSON object per case:
``{"case", "atoms", "seconds", "peak_mb"}`` for energy + forces of the whole case batch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import ase.io
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _bench_common import time_step  # noqa: E402


def build_model(hp: dict, cueq: bool, device: str) -> torch.nn.Module:
    from e3nn import o3
    from mace import modules

    hidden = " + ".join(f"{hp['channels']}x{degree}{'e' if degree % 2 == 0 else 'o'}" for degree in range(hp["hidden_lmax"] + 1))
    kwargs = dict(
        r_max=hp["cutoff"],
        num_bessel=hp["num_bessel"],
        num_polynomial_cutoff=hp["envelope_exponent"],
        max_ell=hp["max_ell"],
        interaction_cls=modules.interaction_classes["RealAgnosticResidualInteractionBlock"],
        interaction_cls_first=modules.interaction_classes["RealAgnosticResidualInteractionBlock"],
        num_interactions=hp["num_layers"],
        num_elements=len(hp["species"]),
        hidden_irreps=o3.Irreps(hidden),
        MLP_irreps=o3.Irreps("16x0e"),
        atomic_energies=np.zeros(len(hp["species"])),
        avg_num_neighbors=hp["avg_num_neighbors"],
        atomic_numbers=list(hp["species"]),
        correlation=hp["correlation"],
        gate=torch.nn.functional.silu,
        radial_MLP=list(hp["radial_hidden"]),
        atomic_inter_scale=1.0,
        atomic_inter_shift=0.0,
    )
    if cueq:
        from mace.modules.wrapper_ops import CuEquivarianceConfig

        kwargs["cueq_config"] = CuEquivarianceConfig(enabled=True, layout="ir_mul", group="O3_e3nn", optimize_all=True)
    return modules.ScaleShiftMACE(**kwargs).to(device)


def batch_of(atoms_list, hp: dict, device: str) -> dict:
    from mace import data, tools
    from mace.tools import torch_geometric

    z_table = tools.AtomicNumberTable(list(hp["species"]))
    dataset = [
        data.AtomicData.from_config(data.config_from_atoms(atoms), z_table=z_table, cutoff=hp["cutoff"]) for atoms in atoms_list
    ]
    loader = torch_geometric.dataloader.DataLoader(dataset, batch_size=len(dataset), shuffle=False)
    return next(iter(loader)).to(device).to_dict()


def main() -> None:
    # e3nn 0.4.4 (pinned by mace-torch) torch.loads its bundled Wigner constants, which hold
    # ``slice`` objects that torch >= 2.6 refuses by default
    torch.serialization.add_safe_globals([slice])
    spec = json.loads(Path(sys.argv[1]).read_text())
    torch.set_default_dtype(getattr(torch, spec["dtype"]))
    torch.manual_seed(0)
    device = spec["device"]
    model = build_model(spec["hyperparameters"], spec.get("cueq", False), device)
    frames = ase.io.read(spec["structures"], ":")
    cases: dict[str, list] = {}
    for atoms in frames:
        cases.setdefault(atoms.info["case"], []).append(atoms)
    for case, atoms_list in cases.items():
        batch = batch_of(atoms_list, spec["hyperparameters"], device)
        seconds, peak = time_step(lambda batch=batch: model(batch, compute_force=True), device, spec["repeats"])
        n_atoms = sum(len(a) for a in atoms_list)
        print(json.dumps({"case": case, "atoms": n_atoms, "seconds": seconds, "peak_mb": peak}), flush=True)


if __name__ == "__main__":
    main()
