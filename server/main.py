"""``create_app()``: the FastAPI application. Models load in the lifespan, never at import."""

from __future__ import annotations

import contextlib
import logging

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.middleware.cors import CORSMiddleware
from fastapi.responses import JSONResponse
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from server.batching import MicroBatcher
from server.config import Settings
from server.jobs import JobRunner, JobStore
from server.metrics import ServerMetrics
from server.routers import health, jobs, models, predict
from server.state import ServerState

log = logging.getLogger("atomistic.server")


class BodyLimitMiddleware:
    """413 for bodies over the limit: by Content-Length before reading, and by counting the
    bytes of chunked bodies as they arrive."""

    def __init__(self, app: ASGIApp, max_body_bytes: int):
        self.app = app
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope.get("path", "").startswith("/v1/jobs"):
            # job uploads stream to disk under their own, larger limit (Settings.max_job_bytes)
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            await _too_large(self.max_body_bytes, send)
            return
        received = 0
        exceeded = False
        answered = False

        async def limited_receive() -> Message:
            nonlocal received, exceeded
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_body_bytes:
                    exceeded = True
                    raise _BodyTooLarge
            return message

        async def guarded_send(message: Message) -> None:
            # whatever the app answers to a body cut short (FastAPI: 400), the client gets 413
            nonlocal answered
            if exceeded:
                if not answered:
                    answered = True
                    await _too_large(self.max_body_bytes, send)
                return
            await send(message)

        try:
            await self.app(scope, limited_receive, guarded_send)
        except _BodyTooLarge:
            if not answered:
                answered = True
                await _too_large(self.max_body_bytes, send)


class RequestMetricsMiddleware:
    """Counts requests by route template and status (``atomistic_requests_total``).  Plain
    ASGI, so a request costs one wrapped ``send`` rather than a task group and streams."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics):
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500

        async def recording_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, recording_send)
        finally:
            route = scope.get("route")  # set by the router on the shared scope
            self.metrics.requests.labels(getattr(route, "path", "unmatched"), str(status)).inc()


class _BodyTooLarge(Exception):
    pass


async def _too_large(limit: int, send: Send) -> None:
    body = JSONResponse({"error": "request too large", "detail": f"body exceeds {limit} bytes"}, status_code=413)
    await send({"type": "http.response.start", "status": 413, "headers": body.raw_headers})
    await send({"type": "http.response.body", "body": body.body})


def create_app(settings: Settings | None = None) -> FastAPI:
    settings = settings or Settings()
    state = ServerState(settings=settings, metrics=ServerMetrics())

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        from ase.build import bulk

        from atomistic.checkpoint import load_potential

        if settings.retain_freed_memory:
            from atomistic.runtime import retain_freed_memory

            retain_freed_memory()
        if settings.torch_threads:
            import torch

            torch.set_num_threads(settings.torch_threads)
        for name in settings.models:
            potential = load_potential(name, device=settings.device, dtype=settings.dtype, backend=settings.backend)
            state.potentials[name] = potential
            z = potential.atomic_numbers[0]
            potential.predict({"numbers": [z, z], "positions": [[0, 0, 0], [1.5, 1.5, 1.5]], "cell": bulk("Cu").cell.array * 2, "pbc": True})  # warm-up
            batcher = MicroBatcher(
                name, potential, max_batch_atoms=settings.max_batch_atoms, max_wait_s=settings.max_wait_ms / 1000,
                queue_size=settings.queue_size, metrics=state.metrics,
            )
            batcher.start()
            state.batchers[name] = batcher
            log.info("model %s loaded (%s, %s, backend %s)", name, settings.device, settings.dtype, potential.metadata.backend)
        state.jobs = JobStore(settings.data_dir)
        state.job_runner = JobRunner(state.jobs, state.potentials, settings.job_chunk_size)
        state.job_runner.start()  # resumes jobs interrupted by a crash or a kill
        state.ready = True
        try:
            yield
        finally:
            state.shutting_down = True  # readiness false at once; queued work still finishes
            await state.job_runner.stop()  # the running chunk finishes and commits
            for batcher in state.batchers.values():
                await batcher.stop(drain=True)

    app = FastAPI(
        title="atomistic",
        description="Equivariant machine-learning force fields: energies (eV), forces (eV/Å), stress (eV/Å³).",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.state.server = state

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        kinds = {401: "unauthorized", 404: "not found", 413: "too large", 422: "invalid input", 503: "unavailable", 504: "timeout"}
        return JSONResponse(
            {"error": kinds.get(exc.status_code, "error"), "detail": exc.detail}, status_code=exc.status_code, headers=exc.headers
        )

    @app.exception_handler(RequestValidationError)
    async def validation_error(request: Request, exc: RequestValidationError) -> JSONResponse:
        detail = [
            {"field": ".".join(str(p) for p in err.get("loc", ())), "reason": err.get("msg", "")} for err in exc.errors()
        ]
        return JSONResponse({"error": "invalid input", "detail": detail}, status_code=422)

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error")
        return JSONResponse({"error": "internal error", "detail": f"{type(exc).__name__}"}, status_code=500)

    app.include_router(health.router)
    app.include_router(models.router)
    app.include_router(predict.router)
    app.include_router(jobs.router)
    if settings.cors_origins:
        app.add_middleware(CORSMiddleware, allow_origins=settings.cors_origins, allow_methods=["*"], allow_headers=["*"])
    app.add_middleware(RequestMetricsMiddleware, metrics=state.metrics)
    app.add_middleware(BodyLimitMiddleware, max_body_bytes=settings.max_body_bytes)
    return app
