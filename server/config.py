"""Server settings: flags of `atomistic serve` and ``ATOMISTIC_*`` environment variables."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict


def _split(value):
    if isinstance(value, str):
        return [item.strip() for item in value.split(",") if item.strip()]
    return value


class Settings(BaseSettings):
    """Every server option; environment variables are ``ATOMISTIC_<NAME>`` (lists comma-separated)."""

    model_config = SettingsConfigDict(env_prefix="ATOMISTIC_", extra="ignore")

    host: str = Field("127.0.0.1", description="Interface to listen on.")
    port: int = Field(8000, description="TCP port.")
    models: Annotated[list[str], NoDecode] = Field(default_factory=lambda: ["default"], description="Models to load (names or checkpoint directories).")
    device: str = Field("cpu", description="cpu or cuda.")
    dtype: str = Field("float64", description="float64 or float32.")
    backend: str = Field("auto", description="Kernel backend: auto, reference, cueq, triton or e3nn (auto: the fastest correct one for the device and dtype).")
    torch_threads: int | None = Field(
        None, description="Intra-op threads for inference (default: torch's choice, all cores); 1 suits many small requests on a small CPU."
    )
    retain_freed_memory: bool = Field(
        True, description="Keep large freed buffers for the next batch instead of returning them to the OS (glibc; saves re-faulting them per batch)."
    )
    max_batch_atoms: int = Field(4096, description="Atom budget of one merged forward pass.")
    max_wait_ms: float = Field(5.0, description="How long the batcher waits to fill a batch, ms.")
    queue_size: int = Field(256, description="Structures that may wait per model before 503.")
    request_timeout_s: float = Field(60.0, description="Per-request timeout, s.")
    max_body_bytes: int = Field(16 * 1024 * 1024, description="Request body limit, bytes.")
    max_structures_per_request: int = Field(1000, description="Structures per /v1/predict request.")
    max_atoms_per_structure: int = Field(4096, description="Atoms per structure.")
    data_dir: str = Field("atomistic-data", description="Folder of the job store (SQLite) and the jobs' inputs and results.")
    max_job_bytes: int = Field(1024**3, description="Upload limit of one batch-scoring job, bytes.")
    job_chunk_size: int = Field(64, description="Structures scored (and committed) per job chunk.")
    api_keys: Annotated[list[str], NoDecode] = Field(default_factory=list, description="Bearer tokens; empty: no authentication.")
    cors_origins: Annotated[list[str], NoDecode] = Field(default_factory=list, description="Allowed CORS origins; empty: CORS off.")

    @field_validator("models", "api_keys", "cors_origins", mode="before")
    @classmethod
    def _comma_separated(cls, value):
        return _split(value)
