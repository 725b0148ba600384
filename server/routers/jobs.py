"""Durable batch-scoring jobs: ``POST /v1/jobs``, ``GET /v1/jobs/{id}``,
``GET /v1/jobs/{id}/results``, ``DELETE /v1/jobs/{id}``."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Literal

from fastapi import APIRouter, Depends, Header, HTTPException, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from starlette.concurrency import run_in_threadpool

from atomistic import keys
from atomistic.models.potential import check_properties
from atomistic.scoring import count_inputs, iter_inputs
from atomistic.voigt import tensor_file_values
from server.dependencies import get_state, require_api_key
from server.jobs import CANCELLED, FINISHED, QUEUED, RUNNING, Job, owner_of
from server.schemas import ErrorResponse, JobStatus
from server.state import ServerState

router = APIRouter()

_ERRORS = {
    401: {"model": ErrorResponse, "description": "Missing or invalid API key"},
    404: {"model": ErrorResponse, "description": "No such job (for this API key) or model"},
    413: {"model": ErrorResponse, "description": "Upload larger than the job size limit"},
    422: {"model": ErrorResponse, "description": "Unreadable input, unknown format or property"},
    503: {"model": ErrorResponse, "description": "Shutting down"},
}
_CONTENT_TYPES = {
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/json-lines": "jsonl",
    "chemical/x-extxyz": "extxyz",
    "chemical/x-xyz": "extxyz",
}


def _status(job: Job, created_now: bool | None = None) -> JobStatus:
    return JobStatus(
        id=job.id, status=job.status, model=job.model, properties=job.properties, n_total=job.n_total, n_done=job.n_done,
        n_failed=job.n_failed, progress=job.n_done / job.n_total if job.n_total else 1.0, error=job.error,
        created=job.created, updated=job.updated, created_now=created_now,
    )


def _owned(state: ServerState, job_id: str, api_key: str | None) -> Job:
    job = state.jobs.get(job_id, owner=owner_of(api_key))
    if job is None:
        raise HTTPException(404, detail=f"no job '{job_id}'")
    return job


@router.post(
    "/v1/jobs", status_code=202, response_model=JobStatus, response_model_exclude_none=True, responses=_ERRORS,
    summary="Submit a batch-scoring job (body: extxyz or JSON lines, streamed to disk)",
    openapi_extra={
        "requestBody": {
            "required": True,
            "description": "Structures: JSON lines (one structure object per line, fields as in /v1/predict) or extended XYZ (positions Å, cell Å).",
            "content": {
                "application/x-ndjson": {"schema": {"type": "string"}},
                "chemical/x-extxyz": {"schema": {"type": "string"}},
            },
        }
    },
)
async def submit_job(
    request: Request,
    model: str = Query("default", description="Name of a loaded model."),
    properties: str = Query("energy,forces", description="Comma-separated: energy (eV), forces (eV/Å), stress (eV/Å³), energies (eV), or a tensor model's dielectric_tensor, piezoelectric_tensor, elastic_tensor."),
    format: Literal["extxyz", "jsonl"] | None = Query(None, description="Input format; default from Content-Type (application/x-ndjson: jsonl, chemical/x-extxyz: extxyz)."),
    idempotency_key: str | None = Header(None, description="Resubmitting with the same key returns the same job."),
    api_key: str | None = Depends(require_api_key),
    state: ServerState = Depends(get_state),
) -> JSONResponse:
    if state.shutting_down:
        raise HTTPException(503, detail="server is shutting down", headers={"Retry-After": "5"})
    if model not in state.potentials:
        raise HTTPException(404, detail=f"query 'model': '{model}' is not loaded; loaded: {sorted(state.potentials)}")
    wanted = [p.strip() for p in properties.split(",") if p.strip()]
    unknown = [p for p in wanted if p not in keys.PROPERTIES]
    if unknown or not wanted:
        raise HTTPException(422, detail=f"query 'properties': unknown {unknown}; choose from {list(keys.PROPERTIES)}")
    try:
        check_properties(wanted, state.potentials[model].properties, model)
    except ValueError as err:
        raise HTTPException(422, detail=f"query 'properties': {err}") from None
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    input_format = format or _CONTENT_TYPES.get(content_type)
    if input_format is None:
        raise HTTPException(422, detail=f"query 'format': give extxyz or jsonl (Content-Type '{content_type}' does not say)")
    owner = owner_of(api_key)
    if idempotency_key is not None:
        existing = state.jobs.find_by_key(owner, idempotency_key)
        if existing is not None:
            return JSONResponse(_status(existing, created_now=False).model_dump(exclude_none=True), status_code=200)
    staged = await _stage_upload(request, state)
    try:  # beside the event loop: a large upload takes a while to count
        n_total = await run_in_threadpool(_count_and_parse_first, staged, input_format)
    except Exception as err:  # noqa: BLE001 - any parse failure is the client's input
        staged.unlink(missing_ok=True)
        raise HTTPException(422, detail=f"body: not readable as {input_format} ({type(err).__name__}: {err})") from None
    if n_total == 0:
        staged.unlink(missing_ok=True)
        raise HTTPException(422, detail="body: no structures")
    job, created = state.jobs.create(
        owner=owner, idempotency_key=idempotency_key, model=model, properties=wanted, input_format=input_format,
        staged_input=staged, n_total=n_total,
    )
    if state.job_runner is not None:
        state.job_runner.notify()
    return JSONResponse(
        _status(job, created_now=created).model_dump(exclude_none=True), status_code=202 if created else 200,
        headers={"Location": f"/v1/jobs/{job.id}"},
    )


def _count_and_parse_first(staged: Path, input_format: str) -> int:
    """The number of structures in the staged upload; raises if it, or its first structure,
    cannot be read."""
    n_total = count_inputs(staged, input_format)
    next(iter_inputs(staged, input_format), None)
    return n_total


async def _stage_upload(request: Request, state: ServerState) -> Path:
    """Stream the body to a staging file, refusing it (413) past ``max_job_bytes``."""
    limit = state.settings.max_job_bytes
    length = request.headers.get("content-length")
    if length is not None and length.isdigit() and int(length) > limit:
        raise HTTPException(413, detail=f"upload of {length} bytes exceeds the job limit of {limit} bytes")
    staging = state.jobs.root / "staging"
    staging.mkdir(exist_ok=True)
    path = staging / uuid.uuid4().hex
    received = 0
    with open(path, "wb") as handle:
        async for piece in request.stream():
            received += len(piece)
            if received > limit:
                handle.close()
                path.unlink(missing_ok=True)
                raise HTTPException(413, detail=f"upload exceeds the job limit of {limit} bytes")
            handle.write(piece)
    return path


@router.get("/v1/jobs/{job_id}", response_model=JobStatus, response_model_exclude_none=True, responses=_ERRORS, summary="Job status and progress")
def job_status(job_id: str, api_key: str | None = Depends(require_api_key), state: ServerState = Depends(get_state)) -> JobStatus:
    return _status(_owned(state, job_id, api_key))


@router.get(
    "/v1/jobs/{job_id}/results", responses=_ERRORS,
    summary="Committed results so far, streamed: JSON lines ({index, energy, forces, ...} or {index, error}) or extxyz",
)
def job_results(
    job_id: str,
    format: Literal["jsonl", "extxyz"] = Query("jsonl", description="jsonl: one record per input structure, in order; extxyz: scored structures with their results (rejected ones omitted)."),
    api_key: str | None = Depends(require_api_key),
    state: ServerState = Depends(get_state),
) -> StreamingResponse:
    job = _owned(state, job_id, api_key)
    path = state.jobs.results_path(job.id)
    committed = job.results_bytes

    def lines():
        if not path.exists():
            return
        with open(path, "rb") as handle:
            remaining = committed
            while remaining > 0:
                line = handle.readline(remaining)
                if not line:
                    return
                remaining -= len(line)
                yield line

    if format == "jsonl":
        return StreamingResponse(lines(), media_type="application/x-ndjson")
    return StreamingResponse(_as_extxyz(lines(), state.jobs.input_path(job), job.input_format), media_type="chemical/x-extxyz")


def _as_extxyz(lines, input_path: Path, input_format: str):
    import io

    import ase.io
    import numpy as np
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.stress import full_3x3_to_voigt_6_stress

    from atomistic.data.convert import as_structure

    inputs = iter_inputs(input_path, input_format)
    for line in lines:
        record = json.loads(line)
        index, item = next(inputs)
        while index < record["index"]:
            index, item = next(inputs)
        if "error" in record:
            continue
        atoms = as_structure(item, index).to_ase()
        values = {k: np.asarray(v) for k, v in record.items() if k in ("energy", "forces", "energies")}
        if "energy" in values:
            values["energy"] = float(values["energy"])
        if "stress" in record:
            values["stress"] = full_3x3_to_voigt_6_stress(np.asarray(record["stress"]))
        atoms.calc = SinglePointCalculator(atoms, **values)
        atoms.info.update(tensor_file_values(record))  # crystal tensors as atomistic's extxyz reader reads them
        atoms.info["index"] = index
        buffer = io.StringIO()
        ase.io.write(buffer, atoms, format="extxyz")
        yield buffer.getvalue().encode()


@router.delete("/v1/jobs/{job_id}", response_model=JobStatus, response_model_exclude_none=True, responses=_ERRORS, summary="Cancel a job")
def cancel_job(job_id: str, api_key: str | None = Depends(require_api_key), state: ServerState = Depends(get_state)) -> JobStatus:
    job = _owned(state, job_id, api_key)
    if job.status not in FINISHED:
        state.jobs.set_status(job.id, CANCELLED, only_from=(QUEUED, RUNNING))
    return _status(state.jobs.get(job.id))
