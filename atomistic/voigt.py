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
