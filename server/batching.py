"""The micro-batcher: one bounded queue and one worker per model.

Concurrent requests for a model are merged into one forward pass up to an atom budget or a
short wait, run on a single worker thread (one per device), and split back per structure.
Requests whose client has gone are dropped before they are computed; an out-of-memory error
splits its batch and retries once, failing only that batch if it happens again; any other error
reruns the batch one structure at a time, so only the structure that fails gets it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import dataclasses
import time
from typing import Any

import torch

from atomistic import keys
from atomistic.data.convert import Structure
from atomistic.data.graph import build_graph, split_results
from atomistic.models.potential import select_properties
from atomistic.runtime import each_alone
from atomistic.voigt import with_voigt_forms


class QueueFull(Exception):
    """The model's queue cannot take the request now; retry later."""


@dataclasses.dataclass
class WorkItem:
    structure: Structure
    properties: frozenset[str]
    future: asyncio.Future
    enqueued: float


class MicroBatcher:
    def __init__(self, name: str, potential, *, max_batch_atoms: int, max_wait_s: float, queue_size: int, metrics):
        self.name = name
        self.potential = potential
        self.max_batch_atoms = max_batch_atoms
        self.max_wait_s = max_wait_s
        self.queue_size = queue_size
        self.metrics = metrics
        self._queue: asyncio.Queue[WorkItem] = asyncio.Queue()
        self._carry: WorkItem | None = None
        self._executor = concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"batch-{name}")
        self._task: asyncio.Task | None = None
        self._stopping = False
        self.heartbeat = time.monotonic()
        self.busy_since: float | None = None

    # ---- lifecycle ---------------------------------------------------------------
    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._run(), name=f"batcher-{self.name}")

    async def stop(self, drain: bool = True) -> None:
        """Finish what is queued (``drain``), then stop the worker."""
        if drain:
            while (self._queue.qsize() or self._carry is not None) and self.alive:
                await asyncio.sleep(0.01)
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            try:
                await self._task
            except (asyncio.CancelledError, Exception):
                pass
        self._executor.shutdown(wait=True)

    @property
    def alive(self) -> bool:
        return self._task is not None and not self._task.done()

    def healthy(self, hang_after_s: float) -> bool:
        """Worker task running, its loop ticking, and no batch running longer than ``hang_after_s``."""
        now = time.monotonic()
        if not self.alive:
            return False
        if self.busy_since is not None:
            return now - self.busy_since < hang_after_s
        return now - self.heartbeat < 5.0

    @property
    def depth(self) -> int:
        return self._queue.qsize() + (1 if self._carry is not None else 0)

    # ---- submission ----------------------------------------------------------------
    def submit(self, structures: list[Structure], properties: set[str]) -> list[asyncio.Future]:
        """Queue every structure of one request (all or none); returns one future each."""
        if self.depth + len(structures) > self.queue_size:
            raise QueueFull(f"model '{self.name}' has {self.depth} structures queued (limit {self.queue_size})")
        loop = asyncio.get_running_loop()
        futures = []
        now = time.monotonic()
        for structure in structures:
            future = loop.create_future()
            self._queue.put_nowait(WorkItem(structure, frozenset(properties), future, now))
            futures.append(future)
        self.metrics.queue_depth.labels(self.name).set(self.depth)
        return futures

    # ---- worker ------------------------------------------------------------------------
    async def _next_item(self, timeout: float | None) -> WorkItem | None:
        if self._carry is not None:
            item, self._carry = self._carry, None
            return item
        try:
            if timeout is None:
                return await asyncio.wait_for(self._queue.get(), timeout=0.5)
            return await asyncio.wait_for(self._queue.get(), timeout=max(timeout, 0.0))
        except TimeoutError:
            return None

    async def _collect(self) -> list[WorkItem]:
        first = None
        while first is None:
            self.heartbeat = time.monotonic()
            if self._stopping:
                return []
            first = await self._next_item(None)
            if first is not None and first.future.cancelled():
                first = None
        batch, atoms = [first], len(first.structure)
        deadline = time.monotonic() + self.max_wait_s
        while atoms < self.max_batch_atoms:
            item = await self._next_item(deadline - time.monotonic())
            if item is None:
                break
            if item.future.cancelled():
                continue
            if atoms + len(item.structure) > self.max_batch_atoms:
                self._carry = item
                break
            batch.append(item)
            atoms += len(item.structure)
        return batch

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while not self._stopping:
            batch = await self._collect()
            batch = [item for item in batch if not item.future.cancelled()]  # clients that left
            if not batch:
                continue
            self.metrics.queue_depth.labels(self.name).set(self.depth)
            started = time.monotonic()
            for item in batch:
                self.metrics.queue_seconds.labels(self.name).observe(started - item.enqueued)
            self.busy_since = started
            try:
                outcomes = await loop.run_in_executor(self._executor, self._compute_with_retry, batch)
            except Exception as err:  # noqa: BLE001 - delivered to the waiting requests
                outcomes = [err] * len(batch)
            finally:
                self.busy_since = None
            elapsed = time.monotonic() - started
            n_atoms = sum(len(item.structure) for item in batch)
            self.metrics.batch_structures.labels(self.name).observe(len(batch))
            self.metrics.batch_atoms.labels(self.name).observe(n_atoms)
            self.metrics.inference_seconds.labels(self.name).observe(elapsed)
            self.metrics.atoms_per_second.labels(self.name).set(n_atoms / max(elapsed, 1e-9))
            for item, outcome in zip(batch, outcomes, strict=True):
                if item.future.done():
                    continue
                if isinstance(outcome, Exception):
                    item.future.set_exception(outcome)
                else:
                    item.future.set_result(outcome)

    # ---- compute (worker thread) ----------------------------------------------------------
    def _compute_with_retry(self, batch: list[WorkItem]) -> list[Any]:
        """Results (or the exception) per item.  Out of memory, the batch is run again in two
        halves; failing for any other reason, one structure at a time, so that only the structure
        that fails gets the error and the requests it shared the batch with are answered."""
        try:
            return self._compute(batch)
        except Exception as err:  # noqa: BLE001 - retried below, delivered per item
            if len(batch) == 1:
                raise
            if isinstance(err, torch.OutOfMemoryError):
                return self._in_halves(batch)
            return each_alone(self._compute, batch)

    def _in_halves(self, batch: list[WorkItem]) -> list[Any]:
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        half = len(batch) // 2
        out: list[Any] = []
        for part in (batch[:half], batch[half:]):
            try:
                out.extend(self._compute(part))
            except torch.OutOfMemoryError as err:
                out.extend([err] * len(part))
        return out

    def _compute(self, batch: list[WorkItem]) -> list[dict[str, Any]]:
        wanted = set().union(*(item.properties for item in batch))
        potential = self.potential
        graph = build_graph([item.structure for item in batch], potential.cutoff, potential.species, dtype=potential.dtype, device=potential.device)
        outputs = potential(graph, compute_forces=not keys.NEED_FORCES.isdisjoint(wanted), compute_stress=keys.STRESS in wanted)
        results = []
        for item, per_system in zip(batch, split_results(outputs, graph), strict=True):
            selected = with_voigt_forms(select_properties(per_system, tuple(item.properties)))
            results.append({k: v if isinstance(v, float) else v.tolist() for k, v in selected.items()})
        return results
