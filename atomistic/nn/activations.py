"""Activation functions by name (the names checkpoints use)."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch


def shifted_softplus(x: torch.Tensor) -> torch.Tensor:
    """``softplus(x) - log 2`` (zero at zero)."""
    return torch.nn.functional.softplus(x) - math.log(2.0)


ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": torch.nn.functional.silu,
    "tanh": torch.tanh,
    "ssp": shifted_softplus,
    "sigmoid": torch.sigmoid,
    "abs": torch.abs,
    "relu": torch.nn.functional.relu,
}


def activation(name: str) -> Callable[[torch.Tensor], torch.Tensor]:
    if name not in ACTIVATIONS:
        raise ValueError(f"unknown activation '{name}'; available: {sorted(ACTIVATIONS)}")
    return ACTIVATIONS[name]
