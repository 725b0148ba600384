"""Engines of ``atomistic score``: score chunks in this process, or on a Ray cluster with one
model replica per worker.  Both yield each chunk's records in input order, so the caller
writes and commits them exactly as :func:`atomistic.scoring.run_scoring` does."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any


def local_map(potential, properties: tuple[str, ...]):
    from atomistic.scoring import score_chunk

    def map_chunks(chunks: Iterator[list]) -> Iterator[list[dict]]:
        return (score_chunk(potential, chunk, properties) for chunk in chunks)

    return map_chunks


class _Replica:
    """One model replica on a Ray worker."""

    def __init__(self, model: str, device: str, dtype: str, backend: str, properties: tuple[str, ...]):
        import torch

        from atomistic.checkpoint import load_potential

        torch.set_num_threads(1)  # one replica per worker: the workers share the cores
        self.potential = load_potential(model, device=device, dtype=dtype, backend=backend)
        self.properties = properties

    def score(self, chunk: list[tuple[int, Any]]) -> list[dict]:
        from atomistic.scoring import score_chunk

        return score_chunk(self.potential, chunk, self.properties)


def ray_map(model: str, device: str, dtype: str, backend: str, properties: tuple[str, ...], workers: int, address: str | None):
    """Chunks scored by ``workers`` Ray actors (each loads ``model`` once), results in order.
    ``address=None`` starts a local Ray instance; otherwise connects to that cluster."""
    import ray
    from ray.util import ActorPool

    if not ray.is_initialized():
        ray.init(address=address, num_cpus=None if address else workers, include_dashboard=False, log_to_driver=False)
    replica = ray.remote(num_cpus=1)(_Replica)
    actors = [replica.remote(model, device, dtype, backend, properties) for _ in range(workers)]
    pool = ActorPool(actors)

    def map_chunks(chunks: Iterator[list]) -> Iterator[list[dict]]:
        # ActorPool.map keeps at most one chunk per actor in flight and yields in input order
        return pool.map(lambda actor, chunk: actor.score.remote(chunk), chunks)

    return map_chunks
