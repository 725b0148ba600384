"""Durable batch-scoring jobs: an embedded SQLite store, inputs and results on disk, and one
runner task that scores queued jobs chunk by chunk (:mod:`atomistic.scoring`).

Layout under ``Settings.data_dir``: ``jobs.sqlite3`` and ``jobs/<id>/input.<extxyz|jsonl>``,
``jobs/<id>/results.jsonl``.  Progress (structures done, bytes of committed results) is
written to SQLite after the results of each chunk are fsync'd, so a server killed at any point
resumes every running job from its last committed chunk on restart: no result is lost and
none is duplicated.  A job whose input cannot be read any more is marked failed with the reason.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import logging
import sqlite3
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from atomistic.scoring import Progress, run_scoring

log = logging.getLogger("atomistic.server.jobs")

QUEUED, RUNNING, SUCCEEDED, FAILED, CANCELLED = "queued", "running", "succeeded", "failed", "cancelled"
FINISHED = (SUCCEEDED, FAILED, CANCELLED)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    idempotency_key TEXT,
    model TEXT NOT NULL,
    properties TEXT NOT NULL,
    input_format TEXT NOT NULL,
    status TEXT NOT NULL,
    n_total INTEGER NOT NULL,
    n_done INTEGER NOT NULL DEFAULT 0,
    n_failed INTEGER NOT NULL DEFAULT 0,
    results_bytes INTEGER NOT NULL DEFAULT 0,
    error TEXT,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    UNIQUE (owner, idempotency_key)
);
"""


def owner_of(api_key: str | None) -> str:
    """Jobs are scoped to the API key that created them (stored as a hash, never in clear)."""
    return "anonymous" if api_key is None else hashlib.sha256(api_key.encode()).hexdigest()[:32]


@dataclasses.dataclass
class Job:
    id: str
    owner: str
    idempotency_key: str | None
    model: str
    properties: list[str]
    input_format: str
    status: str
    n_total: int
    n_done: int
    n_failed: int
    results_bytes: int
    error: str | None
    created: float
    updated: float


class JobStore:
    """SQLite job table plus the per-job folders. Thread-safe (one connection per call)."""

    def __init__(self, data_dir: str | Path):
        self.root = Path(data_dir)
        (self.root / "jobs").mkdir(parents=True, exist_ok=True)
        self.path = self.root / "jobs.sqlite3"
        self._lock = threading.Lock()
        with self._connect() as db:
            db.execute("PRAGMA journal_mode=WAL")
            db.executescript(_SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        db = sqlite3.connect(self.path, timeout=30, isolation_level=None)
        db.row_factory = sqlite3.Row
        db.execute("PRAGMA synchronous=FULL")
        return db

    def folder(self, job_id: str) -> Path:
        return self.root / "jobs" / job_id

    def input_path(self, job: Job) -> Path:
        return self.folder(job.id) / f"input.{job.input_format}"

    def results_path(self, job_id: str) -> Path:
        return self.folder(job_id) / "results.jsonl"

    @staticmethod
    def _job(row: sqlite3.Row | None) -> Job | None:
        if row is None:
            return None
        values = dict(row)
        values["properties"] = json.loads(values["properties"])
        return Job(**values)

    def find_by_key(self, owner: str, idempotency_key: str) -> Job | None:
        with self._connect() as db:
            return self._job(db.execute("SELECT * FROM jobs WHERE owner=? AND idempotency_key=?", (owner, idempotency_key)).fetchone())

    def create(self, *, owner: str, idempotency_key: str | None, model: str, properties: list[str], input_format: str, staged_input: Path, n_total: int) -> tuple[Job, bool]:
        """Register a job whose input was staged at ``staged_input``; with an idempotency key
        already used by this owner, return that job instead (``created=False``)."""
        job_id = uuid.uuid4().hex
        now = time.time()
        with self._lock, self._connect() as db:
            if idempotency_key is not None:
                existing = self._job(db.execute("SELECT * FROM jobs WHERE owner=? AND idempotency_key=?", (owner, idempotency_key)).fetchone())
                if existing is not None:
                    staged_input.unlink(missing_ok=True)
                    return existing, False
            folder = self.folder(job_id)
            folder.mkdir(parents=True)
            staged_input.replace(folder / f"input.{input_format}")
            db.execute(
                "INSERT INTO jobs (id, owner, idempotency_key, model, properties, input_format, status, n_total, created, updated)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (job_id, owner, idempotency_key, model, json.dumps(properties), input_format, QUEUED, n_total, now, now),
            )
        return self.get(job_id), True

    def get(self, job_id: str, owner: str | None = None) -> Job | None:
        """The job, or ``None`` if it does not exist or belongs to another owner."""
        with self._connect() as db:
            job = self._job(db.execute("SELECT * FROM jobs WHERE id=?", (job_id,)).fetchone())
        if job is None or (owner is not None and job.owner != owner):
            return None
        return job

    def next_runnable(self) -> Job | None:
        """The oldest running (interrupted) or queued job."""
        with self._connect() as db:
            row = db.execute(
                "SELECT * FROM jobs WHERE status IN (?, ?) ORDER BY status = ? DESC, created LIMIT 1", (RUNNING, QUEUED, RUNNING)
            ).fetchone()
        return self._job(row)

    def commit(self, job_id: str, progress: Progress) -> None:
        """Record a chunk as done — only while the job is running: a chunk that finishes after
        the job was cancelled is not committed (its bytes are truncated on any later open)."""
        with self._lock, self._connect() as db:
            db.execute(
                "UPDATE jobs SET n_done=?, n_failed=?, results_bytes=?, updated=? WHERE id=? AND status=?",
                (progress.done, progress.failed, progress.results_bytes, time.time(), job_id, RUNNING),
            )

    def set_status(self, job_id: str, status: str, error: str | None = None, only_from: tuple[str, ...] | None = None) -> bool:
        """Set the status (optionally only from the given ones); returns whether it changed."""
        with self._lock, self._connect() as db:
            if only_from:
                marks = ",".join("?" * len(only_from))
                cursor = db.execute(
                    f"UPDATE jobs SET status=?, error=?, updated=? WHERE id=? AND status IN ({marks})",
                    (status, error, time.time(), job_id, *only_from),
                )
            else:
                cursor = db.execute("UPDATE jobs SET status=?, error=?, updated=? WHERE id=?", (status, error, time.time(), job_id))
            return cursor.rowcount > 0

    def status(self, job_id: str) -> str | None:
        with self._connect() as db:
            row = db.execute("SELECT status FROM jobs WHERE id=?", (job_id,)).fetchone()
        return None if row is None else row["status"]


class JobRunner:
    """Scores jobs one at a time, chunk by chunk, in a worker thread; resumes interrupted jobs
    first.  ``stop()`` lets the current chunk finish and commit (graceful shutdown)."""

    def __init__(self, store: JobStore, potentials: dict[str, Any], chunk_size: int):
        self.store = store
        self.potentials = potentials
        self.chunk_size = chunk_size
        self._stopping = threading.Event()
        self._wake = asyncio.Event()
        self._task: asyncio.Task | None = None

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    def notify(self) -> None:
        self._wake.set()

    async def stop(self) -> None:
        self._stopping.set()
        self._wake.set()
        if self._task is not None:
            await self._task

    async def _loop(self) -> None:
        while not self._stopping.is_set():
            job = self.store.next_runnable()
            if job is None:
                self._wake.clear()
                try:
                    await asyncio.wait_for(self._wake.wait(), timeout=1.0)
                except TimeoutError:
                    pass
                continue
            try:
                await asyncio.to_thread(self._run, job)
            except Exception as err:  # noqa: BLE001 - a broken job must not stop the runner
                log.exception("job %s failed", job.id)
                self.store.set_status(job.id, FAILED, f"{type(err).__name__}: {err}", only_from=(QUEUED, RUNNING))

    def _run(self, job: Job) -> None:
        if job.model not in self.potentials:
            self.store.set_status(job.id, FAILED, f"model '{job.model}' is not loaded on this server", only_from=(QUEUED, RUNNING))
            return
        input_path = self.store.input_path(job)
        if not input_path.exists():
            self.store.set_status(job.id, FAILED, f"input file missing: {input_path.name}", only_from=(QUEUED, RUNNING))
            return
        if not self.store.set_status(job.id, RUNNING, only_from=(QUEUED, RUNNING)):
            return  # cancelled meanwhile
        log.info("job %s: scoring from structure %d of %d", job.id, job.n_done, job.n_total)

        def should_stop() -> bool:
            return self._stopping.is_set() or self.store.status(job.id) != RUNNING

        progress = run_scoring(
            self.potentials[job.model],
            input_path,
            self.store.results_path(job.id),
            format=job.input_format,
            properties=tuple(job.properties),
            progress=Progress(job.n_done, job.n_failed, job.results_bytes),
            commit=lambda p: self.store.commit(job.id, p),
            chunk_size=self.chunk_size,
            should_stop=should_stop,
        )
        if progress.done >= job.n_total:
            self.store.set_status(job.id, SUCCEEDED, only_from=(RUNNING,))
            log.info("job %s: done (%d structures, %d failed)", job.id, progress.done, progress.failed)
