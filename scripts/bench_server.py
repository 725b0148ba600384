"""Server throughput with micro-batching against one-structure-at-a-time, in one run.

    python scripts/bench_server.py [--model default] [--clients 64] [--requests 4]

Starts `atomistic serve` twice in a subprocess on loopback — once with the default batcher,
once with the batch budget cut to one structure — and sends the same load each time from this
process: `clients` concurrent async clients, each posting `requests` small structures (8-atom
Si cells, rattled) one per request. Prints structures/s for both and the ratio, plus the mean batch size seen.
"""

from __future__ import annotations

import argparse
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


def run_load(model: str, clients: int, requests: int, **settings) -> tuple[float, float, list[float]]:
    """Start `atomistic serve` in a subprocess, drive it with `clients` concurrent async
    clients from this process, return (structures/s, mean batch size, energies)."""
    import asyncio
    import os
    import subprocess

    import httpx

    port = _free_port()
    env = dict(os.environ, ATOMISTIC_MODELS=model, ATOMISTIC_PORT=str(port), ATOMISTIC_REQUEST_TIMEOUT_S="3600", ATOMISTIC_QUEUE_SIZE="100000")
    env.update({f"ATOMISTIC_{k.upper()}": str(v) for k, v in settings.items()})
    server = subprocess.Popen([sys.executable, "-m", "atomistic.cli", "serve"], env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}"
    try:
        for _ in range(600):
            try:
                if httpx.get(f"{base}/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        payloads = _payloads(model, clients * requests)

        async def client(http, index: int) -> list[float]:
            energies = []
            for r in range(requests):
                response = await http.post("/v1/predict", json=payloads[index * requests + r])
                response.raise_for_status()
                energies.append(response.json()["results"][0]["energy"])
            return energies

        async def drive() -> list[float]:
            limits = httpx.Limits(max_connections=clients)
            async with httpx.AsyncClient(base_url=base, timeout=3600, limits=limits) as http:
                chunks = await asyncio.gather(*(client(http, i) for i in range(clients)))
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
    args = parser.parse_args()
    batched, mean_batch, e_batched = run_load(args.model, args.clients, args.requests, max_wait_ms=5.0)
    single, mean_single, e_single = run_load(args.model, args.clients, args.requests, max_batch_atoms=8)
    worst = max(abs(a - b) for a, b in zip(e_batched, e_single, strict=True))
    print(f"model {args.model}, {args.clients} clients x {args.requests} requests of one 8-atom structure")
    print(f"micro-batched:   {batched:8.1f} structures/s (mean batch {mean_batch:.1f} structures)")
    print(f"one at a time:   {single:8.1f} structures/s (mean batch {mean_single:.1f} structures)")
    print(f"ratio batched / one-at-a-time: {batched / single:.2f}; largest energy difference {worst:.2e} eV")


if __name__ == "__main__":
    main()
