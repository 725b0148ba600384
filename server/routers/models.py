from __future__ import annotations

from fastapi import APIRouter, Depends

from server.dependencies import get_state, require_api_key
from server.schemas import ModelInfo
from server.state import ServerState

router = APIRouter(dependencies=[Depends(require_api_key)])


@router.get("/v1/models", response_model=list[ModelInfo], summary="Loaded models")
def list_models(state: ServerState = Depends(get_state)) -> list[ModelInfo]:
    from atomistic import __version__

    out = []
    for name, potential in state.potentials.items():
        per_species = potential.species_cutoffs
        out.append(
            ModelInfo(
                name=name,
                version=f"checkpoint format 1, atomistic {__version__}",
                species=list(potential.atomic_numbers),
                cutoff=potential.cutoff,
                species_cutoffs=None if per_species is None else dict(zip(potential.atomic_numbers, per_species, strict=True)),
                properties=list(potential.properties),
                dtype=str(potential.dtype).replace("torch.", ""),
                device=str(potential.device),
                backend=potential.metadata.backend,
                encoder=potential.encoder_name,
            )
        )
    return out
