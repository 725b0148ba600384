"""atomistic: equivariant machine-learning force fields as a service.

Public names: :func:`load_potential`, :class:`AtomisticCalculator`, :class:`RemoteCalculator`,
:func:`predict`.
"""

from __future__ import annotations

__version__ = "0.1.0"

from atomistic.checkpoint import load_potential  # noqa: E402


def predict(structures, model: str = "default", properties=("energy", "forces", "stress"), device="cpu", dtype="float64"):
    """Predict with the named model: one call for scripts (loads the model each time)."""
    return load_potential(model, device=device, dtype=dtype).predict(structures, properties=properties)


def __getattr__(name: str):
    if name == "AtomisticCalculator":
        from atomistic.calculators.ase import AtomisticCalculator

        return AtomisticCalculator
    if name == "RemoteCalculator":
        from atomistic.calculators.remote import RemoteCalculator

        return RemoteCalculator
    raise AttributeError(f"module 'atomistic' has no attribute {name!r}")


__all__ = ["AtomisticCalculator", "RemoteCalculator", "load_potential", "predict", "__version__"]
