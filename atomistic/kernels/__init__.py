"""Tensor-product convolution backends behind one interface.

A backend is chosen when a model is built or loaded (``kernel="reference"``), never inside
``forward``.  All backends implement :class:`TensorProductConvolution` for the same
:class:`ConvolutionSpec`, hold no parameters, and so run identical saved weights.
"""

from __future__ import annotations

from collections.abc import Callable

from atomistic.kernels.base import TensorProductConvolution
from atomistic.kernels.reference import ReferenceConvolution
from atomistic.kernels.spec import ConvolutionSpec

_BACKENDS: dict[str, Callable[[ConvolutionSpec], TensorProductConvolution]] = {
    "reference": ReferenceConvolution,
}
DEFAULT_BACKEND = "reference"


def register_backend(name: str, factory: Callable[[ConvolutionSpec], TensorProductConvolution]) -> None:
    """Make a backend available under ``name``."""
    _BACKENDS[name] = factory


def available_backends() -> tuple[str, ...]:
    return tuple(sorted(_BACKENDS))


def make_convolution(spec: ConvolutionSpec, backend: str = DEFAULT_BACKEND) -> TensorProductConvolution:
    """Instantiate the convolution ``spec`` with the named backend."""
    if backend not in _BACKENDS:
        raise ValueError(f"unknown kernel backend '{backend}'; available: {', '.join(available_backends())}")
    return _BACKENDS[backend](spec)


__all__ = [
    "DEFAULT_BACKEND",
    "ConvolutionSpec",
    "TensorProductConvolution",
    "available_backends",
    "make_convolution",
    "register_backend",
]
