"""Prometheus metrics, one registry per app (so several apps in one process stay apart)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class ServerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter("atomistic_requests", "HTTP requests by route and status", ["route", "status"], registry=self.registry)
        self.queue_seconds = Histogram("atomistic_queue_seconds", "Time a structure waited for its batch, s", ["model"], registry=self.registry)
        self.batch_structures = Histogram(
            "atomistic_batch_structures", "Structures per forward pass", ["model"], buckets=(1, 2, 4, 8, 16, 32, 64, 128, 256), registry=self.registry
        )
        self.batch_atoms = Histogram(
            "atomistic_batch_atoms", "Atoms per forward pass", ["model"], buckets=(8, 32, 128, 512, 1024, 2048, 4096, 8192, 16384), registry=self.registry
        )
        self.inference_seconds = Histogram("atomistic_inference_seconds", "Forward (and backward) time per batch, s", ["model"], registry=self.registry)
        self.atoms_per_second = Gauge("atomistic_atoms_per_second", "Throughput of the last batch, atoms/s", ["model"], registry=self.registry)
        self.queue_depth = Gauge("atomistic_queue_depth", "Structures waiting", ["model"], registry=self.registry)
