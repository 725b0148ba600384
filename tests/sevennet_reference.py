"""The parity reference: sevenn's own SevenNetCalculator, optionally run in float64 (its
float32 Clebsch-Gordan buffers replaced by exact float64 ones of the same sign)."""

from __future__ import annotations

import contextlib

import numpy as np
import torch
from e3nn import o3

SEVENN_NAMES = {"sevennet-0": "7net-0", "sevennet-l3i5": "7net-l3i5"}


@contextlib.contextmanager
def _default_dtype(dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _to_double(module, args):
    data = args[0]
    for key in list(data.keys()):
        value = data[key]
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.dtype != torch.float64:
            data[key] = value.double()


class SevenNetReference:
    def __init__(self, name: str, dtype: torch.dtype):
        from sevenn.calculator import SevenNetCalculator

        self.dtype = dtype
        self.calculator = SevenNetCalculator(SEVENN_NAMES[name], device="cpu")
        if dtype == torch.float64:
            model = self.calculator.model.double()
            with torch.no_grad():
                for buffer_name, buffer in model.named_buffers():
                    if "_w3j_" in buffer_name:
                        l1, l2, l3 = (int(x) for x in buffer_name.rsplit("_w3j_", 1)[1].split("_"))
                        exact = o3.wigner_3j(l1, l2, l3, dtype=torch.float64)
                        sign = 1.0 if torch.allclose(buffer, exact, atol=1e-5) else -1.0
                        buffer.copy_(sign * exact)
            for module in model._modules.values():
                module.register_forward_pre_hook(_to_double)

    def __call__(self, atoms) -> dict[str, np.ndarray]:
        atoms = atoms.copy()
        atoms.calc = self.calculator
        with _default_dtype(self.dtype):
            out = {"energy": atoms.get_potential_energy(), "forces": atoms.get_forces()}
            if atoms.pbc.all():
                out["stress"] = atoms.get_stress()
        return out
