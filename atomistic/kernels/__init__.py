"""Equivariant kernels behind one interface: the tensor-product convolution, the symmetric
contraction (product basis) and the equivariant linear layers.

A backend is chosen when a model is built or loaded (``backend="reference"``), never inside
``forward``.  Every backend implements the same specs (:mod:`atomistic.kernels.spec`), holds
no parameters of its own and converts the saved weight layout internally, so one checkpoint
runs on every backend.

Backends:
    ``reference``  dense Clebsch–Gordan contractions in plain PyTorch (any device, any dtype,
                   any derivative order); the default of ``build_potential`` (training).
    ``e3nn``       e3nn ``TensorProduct`` path by path: the ground truth of the parity tests.
    ``cueq``       NVIDIA cuEquivariance (``cuequivariance-torch``): fused CUDA kernels on GPU,
                   its portable PyTorch path on CPU.
    ``triton``     our fused gather → tensor product → scatter Triton kernel for the
                   convolution (the other operations as ``reference``).
    ``cpu``        the same fusion as a C++/OpenMP kernel and the symmetric contraction as a
                   sparse C++ kernel, compiled on first use (linear layers as e3nn); what
                   ``auto`` picks on CPU.
    ``auto``       the fastest correct backend for the device and dtype (see :func:`resolve_backend`).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import logging
import os
from collections.abc import Callable

import torch
from e3nn import o3

from atomistic.kernels.base import SymmetricContraction, TensorProductConvolution
from atomistic.kernels.e3nn_backend import E3nnConvolution, E3nnSymmetricContraction
from atomistic.kernels.reference import DenseConvolution, DenseSymmetricContraction
from atomistic.kernels.spec import ConvolutionSpec, SymmetricContractionSpec

log = logging.getLogger(__name__)

DEFAULT_BACKEND = "reference"


@dataclasses.dataclass(frozen=True)
class Backend:
    """Factories of one backend's operations; ``available`` says whether it can run here."""

    convolution: Callable[[ConvolutionSpec], TensorProductConvolution]
    symmetric_contraction: Callable[[SymmetricContractionSpec], SymmetricContraction]
    available: Callable[[], bool] = lambda: True
    linear: Callable[[o3.Irreps, o3.Irreps], torch.nn.Module] = o3.Linear


def _lazy(module: str, name: str) -> Callable:
    """A factory that imports its (optional) backend module on first use."""

    def factory(*args):
        return getattr(importlib.import_module(module), name)(*args)

    return factory


def _installed(module: str) -> Callable[[], bool]:
    return lambda: importlib.util.find_spec(module) is not None


def _triton_runs_here() -> bool:
    """Triton is installed and has a GPU, or runs its interpreter (``TRITON_INTERPRET=1``)."""
    if importlib.util.find_spec("triton") is None:
        return False
    return torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1"


_BACKENDS: dict[str, Backend] = {
    "reference": Backend(DenseConvolution, DenseSymmetricContraction),
    "e3nn": Backend(E3nnConvolution, E3nnSymmetricContraction),
    "cueq": Backend(
        _lazy("atomistic.kernels.cueq", "CueqConvolution"),
        _lazy("atomistic.kernels.cueq", "CueqSymmetricContraction"),
        _installed("cuequivariance_torch"),
        _lazy("atomistic.kernels.cueq", "CueqLinear"),
    ),
    "cpu": Backend(
        _lazy("atomistic.kernels.cpu_fused", "CpuFusedConvolution"),
        _lazy("atomistic.kernels.cpu_symmetric", "CpuSymmetricContraction"),
        lambda: importlib.import_module("atomistic.kernels.cpu_fused").compiler_present(),
    ),
    "triton": Backend(
        _lazy("atomistic.kernels.triton_conv", "TritonConvolution"),
        DenseSymmetricContraction,
        _triton_runs_here,
    ),
}


def register_backend(name: str, backend: Backend) -> None:
    """Make a backend available under ``name``."""
    _BACKENDS[name] = backend


def available_backends() -> tuple[str, ...]:
    """Backends whose dependencies are installed here."""
    return tuple(sorted(name for name, backend in _BACKENDS.items() if backend.available()))


def resolve_backend(name: str, device: str | torch.device = "cpu", dtype: torch.dtype | None = None) -> str:
    """Turn ``"auto"`` into a concrete backend for ``device``/``dtype``; check any other name.

    ``auto`` picks cuEquivariance on CUDA when it is installed, else the Triton kernel on
    CUDA; on CPU the fused C++ kernel (``cpu``) when it compiles here, else ``reference``
    (docs/benchmarks.md has the measurements behind this order).
    """
    if name == "auto":
        device_type = torch.device(device).type
        available = available_backends()
        if device_type == "cuda" and "cueq" in available:
            chosen = "cueq"
        elif device_type == "cuda" and "triton" in available:
            chosen = "triton"
        elif device_type == "cpu" and importlib.import_module("atomistic.kernels.cpu_fused").extension_builds():
            chosen = "cpu"
        else:
            chosen = "reference"
        log.info("kernel backend 'auto' resolved to '%s' for device %s, dtype %s", chosen, device_type, dtype)
        return chosen
    if name not in _BACKENDS:
        raise ValueError(f"unknown kernel backend '{name}'; available: {', '.join(available_backends())}, auto")
    if not _BACKENDS[name].available():
        hint = {
            "cueq": "pip install cuequivariance-torch (and on CUDA the cuequivariance-ops-torch wheel for your CUDA version)",
            "triton": "pip install triton; it needs a CUDA GPU, or TRITON_INTERPRET=1 to run its interpreter on CPU",
            "cpu": "it needs a C++ compiler (c++/g++) and the ninja package",
        }.get(name, "")
        raise ValueError(
            f"kernel backend '{name}' cannot run here ({hint}); available: {', '.join(available_backends())}, auto"
        )
    return name


def make_convolution(spec: ConvolutionSpec, backend: str = DEFAULT_BACKEND) -> TensorProductConvolution:
    """Instantiate the convolution ``spec`` with the named backend."""
    return _BACKENDS[resolve_backend(backend)].convolution(spec)


def make_linear(irreps_in, irreps_out, backend: str = DEFAULT_BACKEND) -> torch.nn.Module:
    """An equivariant linear layer with e3nn ``o3.Linear``'s parameters (``weight``, ``bias``)
    and layout, computed by the named backend."""
    return _BACKENDS[resolve_backend(backend)].linear(o3.Irreps(irreps_in), o3.Irreps(irreps_out))


def make_symmetric_contraction(spec: SymmetricContractionSpec, backend: str = DEFAULT_BACKEND) -> SymmetricContraction:
    """Instantiate the symmetric contraction ``spec`` with the named backend."""
    return _BACKENDS[resolve_backend(backend)].symmetric_contraction(spec)


__all__ = [
    "DEFAULT_BACKEND",
    "Backend",
    "ConvolutionSpec",
    "SymmetricContraction",
    "SymmetricContractionSpec",
    "TensorProductConvolution",
    "available_backends",
    "make_convolution",
    "make_linear",
    "make_symmetric_contraction",
    "register_backend",
    "resolve_backend",
]
