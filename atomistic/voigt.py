"""Voigt notation for crystal tensors, with the ordering stated in every name.

Elastic tensors (Materials Project order ``xx, yy, zz, yz, xz, xy``): ``C_ijkl`` (GPa,
3×3×3×3) ↔ ``C_IJ`` (6×6), no factors (stiffness convention).  Piezoelectric stress tensors
(JARVIS/VASP order ``xx, yy, zz, xy, yz, zx``): ``e_ijk`` (C/m², 3×3×3, symmetric in ``jk``) ↔
``e_iJ`` (3×6), no factors.
"""

from __future__ import annotations

import numpy as np

MP_VOIGT_PAIRS = ((0, 0), (1, 1), (2, 2), (1, 2), (0, 2), (0, 1))  # xx yy zz yz xz xy
VASP_VOIGT_PAIRS = ((0, 0), (1, 1), (2, 2), (0, 1), (1, 2), (2, 0))  # xx yy zz xy yz zx


def elastic_to_voigt_mp(tensor) -> np.ndarray:
    """``C_ijkl [..., 3, 3, 3, 3]`` → ``C_IJ [..., 6, 6]`` in Materials Project order."""
    tensor = np.asarray(tensor)
    out = np.empty(tensor.shape[:-4] + (6, 6), dtype=tensor.dtype)
    for a, (i, j) in enumerate(MP_VOIGT_PAIRS):
        for b, (k, m) in enumerate(MP_VOIGT_PAIRS):
            out[..., a, b] = tensor[..., i, j, k, m]
    return out


def elastic_from_voigt_mp(voigt) -> np.ndarray:
    """``C_IJ [..., 6, 6]`` (Materials Project order) → ``C_ijkl [..., 3, 3, 3, 3]`` with minor symmetries."""
    voigt = np.asarray(voigt)
    out = np.empty(voigt.shape[:-2] + (3, 3, 3, 3), dtype=voigt.dtype)
    for a, (i, j) in enumerate(MP_VOIGT_PAIRS):
        for b, (k, m) in enumerate(MP_VOIGT_PAIRS):
            for p, q in ((i, j), (j, i)):
                for r, s in ((k, m), (m, k)):
                    out[..., p, q, r, s] = voigt[..., a, b]
    return out


def piezo_to_voigt_vasp(tensor) -> np.ndarray:
    """``e_ijk [..., 3, 3, 3]`` → ``e_iJ [..., 3, 6]`` in JARVIS/VASP order (xx yy zz xy yz zx)."""
    tensor = np.asarray(tensor)
    out = np.empty(tensor.shape[:-3] + (3, 6), dtype=tensor.dtype)
    for a, (j, k) in enumerate(VASP_VOIGT_PAIRS):
        out[..., :, a] = tensor[..., :, j, k]
    return out


def piezo_from_voigt_vasp(voigt) -> np.ndarray:
    """``e_iJ [..., 3, 6]`` (JARVIS/VASP order) → ``e_ijk [..., 3, 3, 3]``, symmetric in ``jk``."""
    voigt = np.asarray(voigt)
    out = np.empty(voigt.shape[:-2] + (3, 3, 3), dtype=voigt.dtype)
    for a, (j, k) in enumerate(VASP_VOIGT_PAIRS):
        out[..., :, j, k] = voigt[..., :, a]
        out[..., :, k, j] = voigt[..., :, a]
    return out


# file conventions of tensor labels (extxyz ``info`` / JSON), converted to full Cartesian tensors
def tensor_label(key: str, value) -> np.ndarray:
    """A crystal-tensor label as stored in a data file → its full Cartesian tensor.

    ``elastic_tensor``: 81 values (3×3×3×3) or 36 (6×6 Voigt, Materials Project order), GPa;
    ``dielectric_tensor``: 9 values (3×3), unitless; ``piezoelectric_tensor``: 27 values
    (3×3×3) or 18 (3×6 Voigt, JARVIS/VASP order), C/m².  Raises ``ValueError`` naming the key
    for any other size or a tensor without its index symmetries.
    """
    flat = np.asarray(value, dtype=np.float64).reshape(-1)
    if key == "elastic_tensor":
        if flat.size == 36:
            tensor = elastic_from_voigt_mp(flat.reshape(6, 6))
        elif flat.size == 81:
            tensor = flat.reshape(3, 3, 3, 3)
        else:
            raise ValueError(f"elastic_tensor: expected 36 (Voigt 6x6) or 81 values, got {flat.size}")
        symmetric = np.allclose(tensor, tensor.transpose(2, 3, 0, 1), rtol=1e-6, atol=1e-6 * max(1.0, np.abs(tensor).max()))
        if not (symmetric and np.allclose(tensor, tensor.transpose(1, 0, 2, 3))):
            raise ValueError("elastic_tensor: lacks major (ij<->kl) or minor symmetry")
        return tensor
    if key == "dielectric_tensor":
        if flat.size != 9:
            raise ValueError(f"dielectric_tensor: expected 9 values (3x3), got {flat.size}")
        return flat.reshape(3, 3)
    if key == "piezoelectric_tensor":
        if flat.size == 18:
            return piezo_from_voigt_vasp(flat.reshape(3, 6))
        if flat.size == 27:
            return flat.reshape(3, 3, 3)
        raise ValueError(f"piezoelectric_tensor: expected 18 (Voigt 3x6) or 27 values, got {flat.size}")
    raise ValueError(f"'{key}' is not a crystal-tensor label")


def with_voigt_forms(result: dict) -> dict:
    """A result dict with ``elastic_tensor_voigt`` (6×6, MP order, GPa) and
    ``piezoelectric_tensor_voigt`` (3×6, JARVIS/VASP order, C/m²) added beside the full tensors."""
    out = dict(result)
    if "elastic_tensor" in out:
        out["elastic_tensor_voigt"] = elastic_to_voigt_mp(out["elastic_tensor"])
    if "piezoelectric_tensor" in out:
        out["piezoelectric_tensor_voigt"] = piezo_to_voigt_vasp(out["piezoelectric_tensor"])
    return out


def tensor_file_values(result: dict) -> dict[str, np.ndarray]:
    """The crystal tensors of a result dict in the file convention that :func:`tensor_label`
    reads back (elastic: 36 Voigt values; piezoelectric: 18; dielectric: 9), flattened."""
    out = {}
    if "elastic_tensor" in result:
        out["elastic_tensor"] = elastic_to_voigt_mp(np.asarray(result["elastic_tensor"])).reshape(-1)
    if "piezoelectric_tensor" in result:
        out["piezoelectric_tensor"] = piezo_to_voigt_vasp(np.asarray(result["piezoelectric_tensor"])).reshape(-1)
    if "dielectric_tensor" in result:
        out["dielectric_tensor"] = np.asarray(result["dielectric_tensor"]).reshape(-1)
    return out
