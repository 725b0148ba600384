"""Request and response models of the REST API (units in every field description)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Property = Literal[
    "energy", "forces", "stress", "energies", "dielectric_tensor", "piezoelectric_tensor", "elastic_tensor", "forces_spread"
]


class StructureIn(BaseModel):
    """One structure as JSON. Give ``numbers`` or ``symbols``."""

    model_config = ConfigDict(extra="forbid")

    numbers: list[int] | None = Field(None, description="Atomic numbers Z, one per atom.")
    symbols: list[str] | None = Field(None, description="Element symbols, one per atom (instead of numbers).")
    positions: list[list[float]] = Field(..., description="Cartesian positions, Å, shape [n_atoms, 3].")
    cell: list[list[float]] | None = Field(None, description="Lattice vectors as rows, Å, shape [3, 3]; required when pbc is set.")
    pbc: bool | list[bool] = Field(False, description="Periodicity along each lattice vector (one bool for all three).")


class PredictRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    model: str = Field("default", description="Name of a loaded model (see GET /v1/models).")
    properties: list[Property] | None = Field(
        None,
        description=(
            "Default: energy and forces (a model with an energy head) or the model's tensors. energy (eV), forces (eV/Å), stress (eV/Å³, 3x3, ASE sign), energies (per-atom, eV); from a model with "
            "crystal-tensor heads (see GET /v1/models): dielectric_tensor (3x3, unitless), piezoelectric_tensor "
            "(3x3x3 and Voigt 3x6, C/m²), elastic_tensor (3x3x3x3 and Voigt 6x6, GPa); from a committee model: "
            "forces_spread (per atom, eV/Å: how far the members' forces disagree)."
        ),
    )
    structures: list[StructureIn] = Field(default_factory=list, description="Structures as JSON.")
    text: str | None = Field(None, description="Structures as file text (may hold many), read with `format`.")
    format: Literal["extxyz", "xyz", "cif", "poscar"] | None = Field(None, description="Format of `text`.")
    id: str | None = Field(None, description="Client's request id, echoed back.")


class StructureResult(BaseModel):
    energy: float | None = Field(None, description="Total energy, eV.")
    energies: list[float] | None = Field(None, description="Per-atom energies, eV.")
    forces: list[list[float]] | None = Field(None, description="Forces, eV/Å, shape [n_atoms, 3].")
    stress: list[list[float]] | None = Field(None, description="Stress, eV/Å³, 3x3, ASE sign (tensile positive); absent without a cell volume.")
    forces_spread: list[float] | None = Field(
        None, description="Committee models only: per atom, the RMS deviation of the members' forces from their mean, eV/Å."
    )
    dielectric_tensor: list[list[float]] | None = Field(None, description="Dielectric tensor ε_ij, unitless, 3x3, symmetric.")
    piezoelectric_tensor: list[list[list[float]]] | None = Field(None, description="Piezoelectric stress tensor e_ijk, C/m², 3x3x3, e_ijk = e_ikj.")
    piezoelectric_tensor_voigt: list[list[float]] | None = Field(None, description="e_iJ, C/m², 3x6, Voigt order xx, yy, zz, xy, yz, zx (JARVIS/VASP).")
    elastic_tensor: list[list[list[list[float]]]] | None = Field(None, description="Stiffness C_ijkl, GPa, 3x3x3x3 with minor and major symmetry.")
    elastic_tensor_voigt: list[list[float]] | None = Field(None, description="C_IJ, GPa, 6x6, Voigt order xx, yy, zz, yz, xz, xy (Materials Project).")


class PredictResponse(BaseModel):
    id: str | None = Field(None, description="The request's id.")
    model: str = Field(..., description="Model that computed the results.")
    results: list[StructureResult] = Field(..., description="One result per input structure, in order.")


class ModelInfo(BaseModel):
    name: str
    version: str = Field(..., description="Checkpoint format and code version that wrote it.")
    species: list[int] = Field(..., description="Supported atomic numbers.")
    cutoff: float = Field(..., description="Radial cutoff, Å (the largest, where cutoffs are per element).")
    species_cutoffs: dict[int, float] | None = Field(
        None, description="Cutoff per atomic number, Å, where the model sets one per element (an a-b edge reaches the mean of the two); null: `cutoff` for every pair."
    )
    properties: list[str] = Field(..., description="Properties this model can return.")
    dtype: str
    device: str
    backend: str = Field(..., description="Tensor-product backend in use.")
    encoder: str


class ErrorResponse(BaseModel):
    error: str = Field(..., description="Short error kind.")
    detail: str | list | dict | None = Field(None, description="What was wrong, naming the field.")


class JobStatus(BaseModel):
    """A batch-scoring job."""

    id: str = Field(..., description="Job id.")
    status: Literal["queued", "running", "succeeded", "failed", "cancelled"] = Field(..., description="Job state.")
    model: str = Field(..., description="Model that scores the job.")
    properties: list[str] = Field(..., description="Properties computed per structure: energy (eV), forces (eV/Å), stress (eV/Å³), energies (eV).")
    n_total: int = Field(..., description="Structures in the input.")
    n_done: int = Field(..., description="Structures scored and committed so far (in input order).")
    n_failed: int = Field(..., description="Structures among n_done that were rejected (their result line holds 'error').")
    progress: float = Field(..., description="n_done / n_total, 0 to 1.")
    error: str | None = Field(None, description="Why the job failed, when it did.")
    created: float = Field(..., description="Creation time, seconds since the Unix epoch (UTC).")
    updated: float = Field(..., description="Last progress or state change, seconds since the Unix epoch (UTC).")
    created_now: bool | None = Field(None, description="On POST: false when an Idempotency-Key matched an existing job.")
