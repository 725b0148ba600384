"""Import the pretrained SevenNet potentials shipped in the ``sevenn`` wheel (MIT licence)
onto the project's NequIP-class encoder.

SevenNet ``.pth`` files are pickles. They are read here, and only here, with
``torch.load(weights_only=True)`` and an explicit allow-list of the numpy types they hold;
nothing else in the project ever unpickles. The result is a normal safetensors checkpoint.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import numpy as np
import torch

from atomistic.checkpoint import save_checkpoint
from atomistic.models.builders import build_potential
from atomistic.models.encoders.nequip import NequIPConfig

# our name -> path inside the sevenn package
SEVENNET_MODELS = {
    "sevennet-0": "pretrained_potentials/SevenNet_0__11Jul2024/checkpoint_sevennet_0.pth",
    "sevennet-l3i5": "pretrained_potentials/SevenNet_l3i5/checkpoint_l3i5.pth",
}

SEVENNET_LICENSE = """SevenNet pretrained weights, from the sevenn package (https://github.com/MDIL-SNU/SevenNet),
MIT License, Copyright (c) 2023 Materials Data Intelligence Lab (MDIL), Seoul National University.
Permission is hereby granted, free of charge, to any person obtaining a copy of this software
and associated documentation files, to deal in the Software without restriction, subject to the
condition that the above copyright notice and this permission notice are included in all copies
or substantial portions of the Software. THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF
ANY KIND."""

_SAFE_GLOBALS = [
    (np._core.multiarray._reconstruct, "numpy.core.multiarray._reconstruct"),
    np.ndarray,
    np.dtype,
    np.dtypes.Float32DType,
    np.dtypes.Float64DType,
    np.dtypes.Int64DType,
]


class SevenNetImportError(RuntimeError):
    """The sevenn package or a checkpoint in it cannot be imported."""


def sevennet_checkpoint_path(name: str) -> Path:
    """Path of a pretrained checkpoint inside the installed ``sevenn`` package."""
    if name not in SEVENNET_MODELS:
        raise SevenNetImportError(f"unknown SevenNet model '{name}'; available: {sorted(SEVENNET_MODELS)}")
    spec = importlib.util.find_spec("sevenn")
    if spec is None or spec.origin is None:
        raise SevenNetImportError("the 'sevenn' package is not installed: pip install sevenn")
    path = Path(spec.origin).parent / SEVENNET_MODELS[name]
    if not path.exists():
        raise SevenNetImportError(f"{path} is missing from the installed sevenn package")
    return path


def read_sevennet_checkpoint(path: str | Path) -> dict[str, Any]:
    """``{"config": dict, "model_state_dict": dict}`` from a SevenNet ``.pth``, read with
    ``weights_only=True`` and an explicit allow-list (never an unrestricted unpickle)."""
    with torch.serialization.safe_globals(_SAFE_GLOBALS):
        checkpoint = torch.load(path, weights_only=True, map_location="cpu")
    return {"config": checkpoint["config"], "model_state_dict": checkpoint["model_state_dict"]}


def _as_list(value) -> list[float]:
    if hasattr(value, "tolist"):
        value = value.tolist()
    return [float(v) for v in value] if isinstance(value, list | tuple) else [float(value)]


def config_from_sevennet(cfg: dict[str, Any], state: dict[str, torch.Tensor]) -> tuple[NequIPConfig, dict[str, Any]]:
    """Map a SevenNet training config (and the stored convolution denominators) onto
    :class:`NequIPConfig` and the energy head config."""
    unsupported = [
        (cfg.get("interaction_type", "nequip") != "nequip", "interaction_type"),
        (bool(cfg.get("use_modality", False)), "use_modality (multi-fidelity models)"),
        (bool(cfg.get("readout_as_fcn", False)), "readout_as_fcn"),
        (bool(cfg.get("use_bias_in_linear", False)), "use_bias_in_linear"),
        (cfg.get("radial_basis", {}).get("radial_basis_name") != "bessel", "radial_basis"),
    ]
    for bad, what in unsupported:
        if bad:
            raise SevenNetImportError(f"SevenNet option {what} is not supported by the importer")
    species = [int(z) for z in cfg["_chemical_species_by_atomic_number"]]
    type_map = cfg["_type_map"]
    if [type_map[z] for z in species] != list(range(len(species))):
        raise SevenNetImportError("SevenNet type map is not in the order of _chemical_species_by_atomic_number")
    num_layers = int(cfg["num_convolution_layer"])
    irreps_layers = cfg.get("irreps_manual")
    if not irreps_layers:
        raise SevenNetImportError("only SevenNet models with irreps_manual are supported")
    cutoff_cfg = cfg["cutoff_function"]
    name = cutoff_cfg["cutoff_function_name"]
    # the value each layer divides by is stored with the weights (SevenNet: sqrt(avg_num_neigh))
    denominators = [float(state[f"{t}_convolution.denominator"].reshape(-1)[0]) for t in range(num_layers)]
    self_connection = {"linear": "linear", "nequip": "species"}[cfg["self_connection_type"]]
    config = NequIPConfig(
        species=tuple(species),
        irreps_layers=tuple(irreps_layers),
        cutoff=float(cfg["cutoff"]),
        num_bessel=int(cfg["radial_basis"]["bessel_basis_num"]),
        cutoff_function={"XPLOR": "xplor", "poly_cut": "polynomial"}[name],
        envelope_exponent=int(cutoff_cfg.get("poly_cut_p_value", 6)),
        cutoff_on=float(cutoff_cfg.get("cutoff_on", 4.5)),
        sh_lmax=int(cfg["lmax_edge"]) if int(cfg.get("lmax_edge", -1)) > 0 else int(cfg["lmax"]),
        parity=bool(cfg["is_parity"]),
        radial_hidden=tuple(int(w) for w in cfg["weight_nn_hidden_neurons"]),
        radial_activation=cfg["act_radial"],
        scalar_activation=dict(cfg["act_scalar"]),
        gate_activation=dict(cfg["act_gate"]),
        self_connection=self_connection,
        conv_denominator=tuple(denominators),
    )
    return config, {"type": "linear", "hidden": None}


def _version_tuple(version: str) -> tuple[int, ...]:
    parts = []
    for piece in str(version).split(".")[:3]:
        digits = "".join(ch for ch in piece if ch.isdigit())
        parts.append(int(digits) if digits else 0)
    return tuple(parts)


def _reorder_old_radial_weights(
    weight: torch.Tensor, spec, stored_w3j: dict[str, torch.Tensor]
) -> torch.Tensor:
    """Checkpoints written before SevenNet 0.11 lay out the radial network's output in path
    enumeration order (and some paths use Clebsch–Gordan blocks of the opposite sign to
    today's e3nn). Reorder the output columns to the sorted path order that
    :class:`ConvolutionSpec` uses, flipping the sign of those paths.

    ``weight``: last radial-MLP layer ``[hidden, weight_numel]``.
    """
    from e3nn import o3

    node, edge = o3.Irreps(spec.irreps_node), o3.Irreps(spec.irreps_edge)
    pairs, enumerated_irreps = spec._enumerated
    permutation = enumerated_irreps.sort().p
    blocks: dict[tuple[int, int, int], torch.Tensor] = {}
    start = 0
    for (i_node, i_edge), k in zip(pairs, range(len(pairs)), strict=True):
        width = node[i_node].mul * edge[i_edge].mul
        block = weight[:, start : start + width]
        start += width
        l1, l2, l3 = node[i_node].ir.l, edge[i_edge].ir.l, enumerated_irreps[k].ir.l
        key = f"_w3j_{l1}_{l2}_{l3}"
        if l1 > 0 and l2 > 0 and l3 > 0 and key in stored_w3j:
            now = o3.wigner_3j(l1, l2, l3, dtype=torch.float64)
            old = stored_w3j[key].to(torch.float64)
            if not torch.allclose(old, now, atol=1e-5):
                if not torch.allclose(old, -now, atol=1e-5):
                    raise SevenNetImportError(f"stored Clebsch-Gordan block {key} matches neither sign of e3nn's")
                block = -block
        blocks[(i_node, i_edge, permutation[k])] = block
    return torch.cat([blocks[path] for path in spec.paths], dim=1)


def convert_state_dict(state: dict[str, torch.Tensor], num_layers: int, self_connection: str) -> dict[str, torch.Tensor]:
    """SevenNet parameter names → this project's (weights only; derived constants dropped)."""
    out = {
        "encoder.radial_basis.frequencies": state["edge_embedding.basis_function.coeffs"],
        "encoder.embedding.weight": state["onehot_to_feature_x.linear.weight"],
        "heads.energy.readout_hidden.weight": state["reduce_input_to_hidden.linear.weight"],
        "heads.energy.readout_out.weight": state["reduce_hidden_to_energy.linear.weight"],
        "heads.energy.e0s": state["rescale_atomic_energy.shift"],
        "heads.energy.scale": state["rescale_atomic_energy.scale"],
    }
    for t in range(num_layers):
        ours = f"encoder.layers.{t}"
        sc_key = f"{t}_self_connection_intro.linear.weight" if self_connection == "linear" else f"{t}_self_connection_intro.fc_tensor_product.weight"
        out[f"{ours}.self_connection.weight"] = state[sc_key]
        out[f"{ours}.linear_in.weight"] = state[f"{t}_self_interaction_1.linear.weight"]
        out[f"{ours}.linear_out.weight"] = state[f"{t}_self_interaction_2.linear.weight"]
        k = 0
        while f"{t}_convolution.weight_nn.layer{k}.weight" in state:
            out[f"{ours}.radial_mlp.layer{k}.weight"] = state[f"{t}_convolution.weight_nn.layer{k}.weight"]
            k += 1
    return out


def import_sevennet(name: str, output: str | Path, *, source: str | Path | None = None) -> Path:
    """Convert the named SevenNet model into an atomistic checkpoint directory ``output``."""
    path = Path(source) if source is not None else sevennet_checkpoint_path(name)
    checkpoint = read_sevennet_checkpoint(path)
    cfg = checkpoint["config"]
    config, head = config_from_sevennet(cfg, checkpoint["model_state_dict"])
    architecture = {"encoder": {"name": "nequip", "config": config.to_dict()}, "heads": {"energy": head}}
    potential = build_potential(architecture, name=name, dtype=torch.float32)
    state = convert_state_dict(checkpoint["model_state_dict"], config.num_layers, config.self_connection)
    expected = {k for k, v in potential.named_parameters() if v.numel() > 0} | {"heads.energy.e0s", "heads.energy.scale"}
    missing = sorted(expected - set(state))
    if missing:
        raise SevenNetImportError(f"no SevenNet weights for {missing[:5]}")
    current = potential.state_dict()
    for key, value in state.items():
        if current[key].shape != value.shape:
            raise SevenNetImportError(f"{key}: SevenNet shape {tuple(value.shape)} != ours {tuple(current[key].shape)}")
    if _version_tuple(cfg.get("version", "0.0.0")) < (0, 11, 0):
        source_state = checkpoint["model_state_dict"]
        for t, layer in enumerate(potential.encoder.layers):
            key = f"encoder.layers.{t}.radial_mlp.layer{len(config.radial_hidden)}.weight"
            prefix = f"{t}_convolution.convolution._compiled_main_left_right."
            stored = {k[len(prefix):]: v for k, v in source_state.items() if k.startswith(prefix)}
            state[key] = _reorder_old_radial_weights(state[key], layer.spec, stored)
    potential.load_state_dict(state, strict=False)
    import sevenn

    provenance = {
        "source": f"sevenn {getattr(sevenn, '__version__', '?')} package, {SEVENNET_MODELS.get(name, str(path))}",
        "sevennet_version": str(cfg.get("version", "?")),
        "training_data": "MPtrj (Materials Project relaxation trajectories, PBE/PBE+U), as published by the SevenNet authors",
        "license": "MIT (SevenNet); see LICENSE_SEVENNET",
        "converted_by": "atomistic import sevennet",
    }
    output = Path(output)
    save_checkpoint(potential, output, provenance=provenance, metrics={}, weights_dtype=torch.float32)
    (output / "LICENSE_SEVENNET").write_text(SEVENNET_LICENSE + "\n")
    (output / "MODEL_CARD.md").write_text(_model_card(name, config, cfg, provenance))
    return output


def _model_card(name: str, config: NequIPConfig, cfg: dict[str, Any], provenance: dict[str, Any]) -> str:
    from ase.data import chemical_symbols

    elements = " ".join(chemical_symbols[z] for z in sorted(config.species))
    return f"""# Model card: `{name}`

SevenNet pretrained universal potential, converted onto atomistic's NequIP-class encoder by
`atomistic import sevennet {name}`. The conversion is exact: energies, forces and stress equal
those of `sevenn`'s own `SevenNetCalculator` on the same structures (see
`tests/test_sevennet.py`; float64 tolerances 1e-6 eV/atom, 1e-5 eV/Å, 1e-6 eV/Å³).

## Provenance

- Source: {provenance["source"]} (SevenNet version {provenance["sevennet_version"]} checkpoint).
- Authors: Y. Park, J. Kim, S. Hwang, S. Han, "Scalable Parallel Algorithm for Graph Neural
  Network Interatomic Potentials in Molecular Dynamics Simulations", J. Chem. Theory Comput.
  20, 4857 (2024), doi:10.1021/acs.jctc.4c00190.
- Licence: MIT, as distributed in the `sevenn` wheel; notice in `LICENSE_SEVENNET`.

## Training data

MPtrj: Materials Project relaxation trajectories (compiled by the CHGNet authors), DFT with
PBE and PBE+U, {len(config.species)} elements. Energies are MPtrj's (uncorrected) total energies;
MP2020 compatibility corrections are not applied.

Elements: {elements}

## Architecture

NequIP-class: {config.num_layers} interaction layers, node irreps {", ".join(config.irreps_layers)},
spherical harmonics to L = {config.sh_lmax}, parity {"on" if config.parity else "off"},
cutoff {config.cutoff} Å with an {config.cutoff_function.upper()} switch from {config.cutoff_on} Å,
{config.num_bessel} Bessel functions (trainable frequencies), radial MLP {list(config.radial_hidden)}
({config.radial_activation}), gated nonlinearities, {config.self_connection} self-connections,
neighbour sums divided by {config.conv_denominator[0]:.4f}, species-wise scale and shift.
Weights are SevenNet's float32 weights, unchanged (reordered to atomistic's layout).

## Published accuracy

See the SevenNet paper above and the Matbench Discovery entry `{name}`; atomistic does not
re-train or re-evaluate this model, it reproduces it.

## Limits

- PBE(+U) level of theory of MPtrj; no dispersion correction.
- Trained on near-equilibrium inorganic crystals: molecules, surfaces and far-from-equilibrium
  configurations are extrapolation.
- An isolated atom's energy is not a reference energy for this architecture.
"""
