"""Unit conversions used where data crosses the project's boundary.

Internal units: eV, Å, eV/Å, eV/Å³ (stress, ASE sign convention: positive = tensile).
"""

from __future__ import annotations

from ase import units as _ase_units

EV_PER_ANG3_TO_GPA = 1.0 / _ase_units.GPa  # 160.21766... GPa per eV/Å³
KBAR_TO_EV_PER_ANG3 = 0.1 * _ase_units.GPa  # 1 kbar = 0.1 GPa
