"""Shared request dependencies: the server state and API-key authentication."""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

from server.state import ServerState

# Both are ``async``: FastAPI runs plain ``def`` dependencies in a worker thread, a thread
# hop per request that costs more than the work they do.


async def get_state(request: Request) -> ServerState:
    return request.app.state.server


async def require_api_key(request: Request) -> str | None:
    """With API keys configured, a ``Authorization: Bearer <key>`` header is required;
    returns the key (jobs are scoped to it)."""
    keys = request.app.state.server.settings.api_keys
    if not keys:
        return None
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not any(hmac.compare_digest(token.strip(), key) for key in keys):
        raise HTTPException(status_code=401, detail="missing or invalid API key (Authorization: Bearer <key>)", headers={"WWW-Authenticate": "Bearer"})
    return token.strip()
