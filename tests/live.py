"""Helpers for tests that talk to a real server over loopback."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import threading
import time
from collections.abc import Iterator

import httpx


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_until_ready(url: str, timeout_s: float = 60.0, process: subprocess.Popen | None = None) -> None:
    """Poll ``url/readyz`` until it answers 200; fail if ``process`` exits or time runs out."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"{url}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        if process is not None and process.poll() is not None:
            raise RuntimeError("server exited during start-up")
        time.sleep(0.05)
    raise RuntimeError(f"{url} did not become ready within {timeout_s} s")


@contextlib.contextmanager
def threaded_server(app, port: int | None = None) -> Iterator[str]:
    """Serve ``app`` with uvicorn on a background thread; yields its base URL once ready."""
    import uvicorn

    port = port or free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(url)
        yield url
    finally:
        server.should_exit = True
        thread.join(timeout=30)
