"""Typed builders: an architecture config (a plain dict in a checkpoint manifest) maps 1:1
onto builder arguments."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from atomistic.kernels import DEFAULT_BACKEND, resolve_backend
from atomistic.models.encoders.mace import MACEConfig, MACEEncoder
from atomistic.models.encoders.nequip import NequIPConfig, NequIPEncoder
from atomistic.models.heads.energy import EnergyHead, LinearEnergyHead
from atomistic.models.heads.tensors import (
    DIELECTRIC,
    ELASTIC,
    PIEZOELECTRIC,
    DielectricHead,
    ElasticHead,
    PiezoelectricHead,
    SphericalTensorHead,
)
from atomistic.models.potential import Potential, PotentialMetadata

ENCODERS: dict[str, tuple[type, Callable[..., torch.nn.Module]]] = {
    "mace": (MACEConfig, MACEEncoder),
    "nequip": (NequIPConfig, NequIPEncoder),
}


def build_encoder(name: str, config: dict[str, Any], backend: str = DEFAULT_BACKEND) -> torch.nn.Module:
    if name not in ENCODERS:
        raise ValueError(f"unknown encoder '{name}'; available: {sorted(ENCODERS)}")
    config_cls, encoder_cls = ENCODERS[name]
    try:
        typed = config_cls(**config)
    except TypeError as err:
        raise ValueError(f"invalid {name} encoder config: {err}") from None
    return encoder_cls(typed, backend=backend)


def build_energy_head(
    encoder: torch.nn.Module,
    type: str = "readout_mlp",
    e0s=None,
    scale: float = 1.0,
    shift: float = 0.0,
    mlp_hidden: int = 16,
    hidden: int | None = None,
) -> torch.nn.Module:
    """``type="readout_mlp"``: :class:`EnergyHead` (per-layer linear + MLP readout, MACE);
    ``type="linear"``: :class:`LinearEnergyHead` (two linear maps, per-species scale/shift)."""
    if type == "linear":
        return LinearEnergyHead(encoder.irreps_out, num_species=len(encoder.config.species), hidden=hidden)
    if type != "readout_mlp":
        raise ValueError(f"unknown energy head type '{type}'; use 'readout_mlp' or 'linear'")
    return EnergyHead(
        encoder.irreps_out,
        num_layers=encoder.num_layers,
        num_species=len(encoder.config.species),
        e0s=e0s,
        scale=scale,
        shift=shift,
        mlp_hidden=mlp_hidden,
    )


def build_tensor_head(output_key: str):
    """Builder of the crystal-tensor head writing ``output_key``.

    ``basis="cartesian"``: the CEITNet head of that order (:mod:`atomistic.models.heads.tensors`);
    ``basis="spherical"``: the spherical-harmonic baseline on the same encoder.  ``scale`` is
    the tensor's unit scale (GPa for elastic, unitless for dielectric, C/m² for piezoelectric),
    set from the training data; ``pairs`` is the number of many-body products of the Cartesian
    dielectric and elastic heads.
    """

    def build(
        encoder: torch.nn.Module, basis: str = "cartesian", channels: int = 8, hidden: int = 32, scale: float = 1.0, lmax: int = 4, pairs: int = 1
    ):
        if basis == "cartesian":
            if output_key == PIEZOELECTRIC:
                return PiezoelectricHead(encoder.irreps_out, encoder.cutoff, channels=channels, hidden=hidden, scale=float(scale))
            head_cls = {DIELECTRIC: DielectricHead, ELASTIC: ElasticHead}[output_key]
            return head_cls(encoder.irreps_out, encoder.cutoff, channels=channels, hidden=hidden, scale=float(scale), pairs=pairs)
        if basis == "spherical":
            return SphericalTensorHead(encoder.irreps_out, encoder.cutoff, output_key, channels=channels, lmax=lmax, hidden=hidden, scale=scale)
        raise ValueError(f"{output_key}: unknown basis '{basis}'; use 'cartesian' or 'spherical'")

    return build


HEADS: dict[str, Callable[..., torch.nn.Module]] = {
    "energy": build_energy_head,
    **{key: build_tensor_head(key) for key in (DIELECTRIC, PIEZOELECTRIC, ELASTIC)},
}


def build_potential(
    architecture: dict[str, Any],
    *,
    backend: str = DEFAULT_BACKEND,
    name: str = "unnamed",
    dtype: torch.dtype = torch.float64,
    device: str | torch.device = "cpu",
) -> Potential:
    """Build a freshly initialised :class:`Potential` from an architecture dict::

        {"encoder": {"name": "mace", "config": {...MACEConfig fields...}},
         "heads": {"energy": {"mlp_hidden": 16},
                   "elastic_tensor": {"basis": "cartesian", "channels": 8, "scale": 100.0}}}

    Heads are optional one by one (``heads`` defaults to an energy head only).
    """
    backend = resolve_backend(backend, device, dtype)
    encoder_spec = architecture["encoder"]
    with default_dtype(dtype):
        encoder = build_encoder(encoder_spec["name"], dict(encoder_spec["config"]), backend=backend)
        heads = {}
        for head_name, head_config in architecture.get("heads", {"energy": {}}).items():
            if head_name not in HEADS:
                raise ValueError(f"unknown head '{head_name}'; available: {sorted(HEADS)}")
            heads[head_name] = HEADS[head_name](encoder, **head_config)
    metadata = PotentialMetadata(name=name, architecture=architecture, backend=backend)
    return Potential(encoder, heads, metadata).to(device=device, dtype=dtype)


def mace_architecture(config: MACEConfig, energy_mlp_hidden: int = 16) -> dict[str, Any]:
    return {
        "encoder": {"name": "mace", "config": config.to_dict()},
        "heads": {"energy": {"mlp_hidden": energy_mlp_hidden}},
    }


class default_dtype:
    def __init__(self, dtype: torch.dtype):
        self.dtype = dtype

    def __enter__(self):
        self.previous = torch.get_default_dtype()
        torch.set_default_dtype(self.dtype)

    def __exit__(self, *exc):
        torch.set_default_dtype(self.previous)
