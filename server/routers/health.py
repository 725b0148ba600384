from __future__ import annotations

from fastapi import APIRouter, Depends
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from server.dependencies import get_state, require_api_key
from server.state import ServerState

router = APIRouter()


@router.get("/healthz", summary="Liveness: the process answers")
def healthz() -> dict:
    return {"status": "alive"}


@router.get("/readyz", summary="Readiness: models loaded and warmed up, batch workers alive")
def readyz(state: ServerState = Depends(get_state)) -> JSONResponse:
    hang = state.settings.request_timeout_s
    workers = {name: batcher.healthy(hang) for name, batcher in state.batchers.items()}
    ready = state.ready and not state.shutting_down and all(workers.values()) and bool(workers)
    body = {"status": "ready" if ready else "not ready", "workers": workers, "shutting_down": state.shutting_down}
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics", summary="Prometheus metrics", dependencies=[Depends(require_api_key)])
def metrics(state: ServerState = Depends(get_state)) -> Response:
    return Response(generate_latest(state.metrics.registry), media_type=CONTENT_TYPE_LATEST)
