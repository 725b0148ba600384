from __future__ import annotations

import asyncio

from fastapi import APIRouter, Depends, HTTPException, Request, Response
from starlette.concurrency import run_in_threadpool

from atomistic.data.convert import (
    StructureError,
    UnsupportedFormatError,
    as_structure,
    parse_structures,
    validate_structure,
)
from atomistic.models.potential import check_properties
from server.batching import QueueFull
from server.dependencies import get_state, require_api_key
from server.schemas import ErrorResponse, PredictRequest, PredictResponse, StructureResult
from server.state import ServerState

CLIENT_CLOSED_REQUEST = 499  # the status recorded in the metrics for a client that left before its answer

router = APIRouter(dependencies=[Depends(require_api_key)])

_ERRORS = {
    401: {"model": ErrorResponse, "description": "Missing or invalid API key"},
    404: {"model": ErrorResponse, "description": "Unknown model"},
    413: {"model": ErrorResponse, "description": "Request or structure too large"},
    422: {"model": ErrorResponse, "description": "Invalid structure (names the structure, field and reason)"},
    503: {"model": ErrorResponse, "description": "Queue full or shutting down; retry after Retry-After seconds"},
    504: {"model": ErrorResponse, "description": "Request timed out"},
}


def _structures(body: PredictRequest, state: ServerState, species) -> list:
    settings = state.settings
    raw: list = [s.model_dump(exclude_none=True) for s in body.structures]
    if body.text is not None:
        if body.format is None:
            raise HTTPException(422, detail="field 'format': required with 'text' (extxyz, xyz, cif or poscar)")
        try:
            raw.extend(parse_structures(body.text, body.format))
        except UnsupportedFormatError as err:
            raise HTTPException(422, detail=f"field 'text': {err}") from None
    if not raw:
        raise HTTPException(422, detail="field 'structures': no structures given")
    if len(raw) > settings.max_structures_per_request:
        raise HTTPException(413, detail=f"{len(raw)} structures exceed the limit of {settings.max_structures_per_request} per request")
    structures = []
    for index, item in enumerate(raw):
        try:
            structure = as_structure(item, index)
            if len(structure) > min(settings.max_atoms_per_structure, settings.max_batch_atoms):
                limit = min(settings.max_atoms_per_structure, settings.max_batch_atoms)
                raise HTTPException(413, detail=f"structure {index}: {len(structure)} atoms exceed the limit of {limit}")
            structures.append(validate_structure(structure, index, supported_numbers=species, max_atoms=settings.max_atoms_per_structure))
        except StructureError as err:
            raise HTTPException(422, detail=str(err)) from None
    return structures


async def _client_gone(request: Request) -> None:
    """Returns once the client has disconnected.  The body has been read, so the server's
    ``receive`` now only answers ``http.disconnect``: waiting on it costs nothing per request,
    unlike polling ``is_disconnected``."""
    while (await request.receive())["type"] != "http.disconnect":
        pass


@router.post(
    "/v1/predict", response_model=PredictResponse, response_model_exclude_none=True, responses=_ERRORS,
    summary="Energies, forces, stress of structures",
)
async def predict(body: PredictRequest, request: Request, state: ServerState = Depends(get_state)) -> PredictResponse:
    if state.shutting_down:
        raise HTTPException(503, detail="server is shutting down", headers={"Retry-After": "5"})
    if body.model not in state.batchers:
        raise HTTPException(404, detail=f"field 'model': '{body.model}' is not loaded; loaded: {sorted(state.batchers)}")
    batcher = state.batchers[body.model]
    potential = batcher.potential
    wanted = body.properties or (["energy", "forces"] if potential.has_energy else list(potential.properties))
    try:
        check_properties(wanted, potential.properties, body.model)
    except ValueError as err:
        raise HTTPException(422, detail=f"field 'properties': {err}") from None
    # parsing and validation (a neighbour search per structure) run beside the event loop, so a
    # large text body does not hold up other requests and the health checks
    structures = await run_in_threadpool(_structures, body, state, batcher.potential.atomic_numbers)
    try:
        futures = batcher.submit(structures, set(wanted))
    except QueueFull as err:
        raise HTTPException(503, detail=str(err), headers={"Retry-After": "1"}) from None
    all_done = asyncio.gather(*futures, return_exceptions=True)
    watcher = asyncio.ensure_future(_client_gone(request))
    done: set = set()
    try:
        done, _ = await asyncio.wait({all_done, watcher}, timeout=state.settings.request_timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watcher.cancel()
        if all_done not in done:  # timed out, client gone or request cancelled
            for future in futures:
                future.cancel()  # the worker drops cancelled items before computing them
            all_done.cancel()
    if all_done not in done:
        if watcher in done:  # the client left: there is nobody to answer
            return Response(status_code=CLIENT_CLOSED_REQUEST)
        raise HTTPException(504, detail=f"request took longer than {state.settings.request_timeout_s} s")
    results = []
    for future in futures:
        error = future.exception()
        if error is not None:
            raise HTTPException(500, detail=f"inference failed: {type(error).__name__}: {error}")
        results.append(StructureResult(**future.result()))
    return PredictResponse(id=body.id, model=body.model, results=results)
