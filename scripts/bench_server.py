"""Server throughput with micro-batching against one-structure-at-a-time, in one run.

    python scripts/bench_server.py [--model default] [--clients 64] [--requests 4] [--dtype float64] [--pin]

Starts `atomistic serve` twice in a subprocess on loopback — once with the default batcher,
once with the batch budget cut to one structure — and sends the same load each time from this
process: `clients` concurrent keep-alive connections (asyncio streams, pre-encoded requests),
each posting `requests` small structures (8-atom Si cells, rattled) one per request. Prints
structures/s for both and the ratio, plus the mean batch size seen. `--pin` puts the server on
one CPU (one torch thread) and the load generator on the others, so the two do not compete.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _payloads(model: str, n: int) -> list[dict]:
    from ase.build import bulk

    out = []
    for k in range(n):
        atoms = bulk("Si", "diamond", 5.43, cubic=True)
        atoms.rattle(0.03, seed=k)
        structure = {"numbers": atoms.numbers.tolist(), "positions": atoms.positions.tolist(), "cell": atoms.cell.array.tolist(), "pbc": True}
        out.append({"model": model, "properties": ["energy", "forces"], "structures": [structure]})
    return out


def _request_bytes(port: int, payload: dict) -> bytes:
    body = json.dumps(payload).encode()
    head = f"POST /v1/predict HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    return head.encode() + body


async def _read_response(reader) -> tuple[int, bytes]:
    """Status and body of one HTTP/1.1 response with a Content-Length (uvicorn's JSON answers)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    length = next(int(line.split(":", 1)[1]) for line in lines[1:] if line.lower().startswith("content-length:"))
    return status, await reader.readexactly(length)


def run_load(model: str, clients: int, requests: int, server_cpus: set[int] | None = None, **settings) -> tuple[float, float, list[float]]:
    """Start `atomistic serve` in a subprocess, drive it with `clients` concurrent async
    clients from this process, return (structures/s, mean batch size, energies)."""
    import asyncio
    import subprocess

    import httpx

    port = _free_port()
    env = dict(os.environ, ATOMISTIC_MODELS=model, ATOMISTIC_PORT=str(port), ATOMISTIC_REQUEST_TIMEOUT_S="3600", ATOMISTIC_QUEUE_SIZE="100000")
    env.update({f"ATOMISTIC_{k.upper()}": str(v) for k, v in settings.items()})
    pin = (lambda: os.sched_setaffinity(0, server_cpus)) if server_cpus else None
    server = subprocess.Popen(
        [sys.executable, "-m", "atomistic.cli", "serve"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, preexec_fn=pin
    )
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        payloads = [_request_bytes(port, p) for p in _payloads(model, clients * requests)]

        async def client(index: int) -> list[float]:
            # one keep-alive connection, requests pre-encoded: the load generator does as little
            # work per request as possible, so it measures the server rather than itself
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            energies = []
            for r in range(requests):
                writer.write(payloads[index * requests + r])
                await writer.drain()
                status, body = await _read_response(reader)
                if status != 200:
                    raise RuntimeError(f"HTTP {status}: {body[:200]!r}")
                energies.append(json.loads(body)["results"][0]["energy"])
            writer.close()
            return energies

        async def drive() -> list[float]:
            chunks = await asyncio.gather(*(client(i) for i in range(clients)))
            return [e for chunk in chunks for e in chunk]

        start = time.perf_counter()
        energies = asyncio.run(drive())
        elapsed = time.perf_counter() - start
        metrics = httpx.get(f"{base}/metrics").text
    finally:
        server.terminate()
        server.wait(timeout=60)
    count = float(next(line for line in metrics.splitlines() if line.startswith("atomistic_batch_structures_count")).split()[-1])
    total = float(next(line for line in metrics.splitlines() if line.startswith("atomistic_batch_structures_sum")).split()[-1])
    return len(energies) / elapsed, total / max(count, 1), energies


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="default")
    parser.add_argument("--clients", type=int, default=64)
    parser.add_argument("--requests", type=int, default=4)
    parser.add_argument("--dtype", default=os.environ.get("ATOMISTIC_DTYPE", "float64"), help="the server's dtype (float64 or float32)")
    parser.add_argument("--pin", action="store_true", help="server on CPU 0 (ATOMISTIC_TORCH_THREADS=1), load generator on the other CPUs")
    args = parser.parse_args()
    server_cpus, settings = None, {"dtype": args.dtype}
    if args.pin:
        cpus = sorted(os.sched_getaffinity(0))
        if len(cpus) < 2:
            parser.error("--pin needs at least two CPUs")
        server_cpus, settings = {cpus[0]}, {**settings, "torch_threads": 1}
        os.sched_setaffinity(0, set(cpus[1:]))
    batched, mean_batch, e_batched = run_load(args.model, args.clients, args.requests, server_cpus, max_wait_ms=5.0, **settings)
    single, mean_single, e_single = run_load(args.model, args.clients, args.requests, server_cpus, max_batch_atoms=8, **settings)
    worst = max(abs(a - b) for a, b in zip(e_batched, e_single, strict=True))
    where = "server pinned to one CPU, clients on the others" if args.pin else "server and clients sharing all CPUs"
    print(f"model {args.model} ({args.dtype}), {args.clients} clients x {args.requests} requests of one 8-atom structure ({where})")
    print(f"micro-batched:   {batched:8.1f} structures/s (mean batch {mean_batch:.1f} structures)")
    print(f"one at a time:   {single:8.1f} structures/s (mean batch {mean_single:.1f} structures)")
    print(f"ratio batched / one-at-a-time: {batched / single:.2f}; largest energy difference {worst:.2e} eV")


if __name__ == "__main__":
    main()
