"""Helpers shared by the benchmark workers (stdlib + torch only: also imported by the peer
worker that runs in the mace-torch virtualenv)."""

from __future__ import annotations

import statistics
import time
from pathlib import Path

import torch


def _status_kib(field: str) -> int | None:
    status = Path("/proc/self/status")
    if not status.exists():
        return None
    for line in status.read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    return None


def reset_peak_rss() -> int | None:
    """Reset the kernel's peak-RSS mark (Linux ``clear_refs`` 5); return the current RSS (KiB)."""
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    return _status_kib("VmRSS")


def peak_rss_growth_mb(rss_before_kib: int | None) -> float | None:
    """Peak RSS since :func:`reset_peak_rss` minus the RSS at that time, MiB (CPU memory)."""
    peak = _status_kib("VmHWM")
    if peak is None or rss_before_kib is None:
        return None
    return (peak - rss_before_kib) / 1024


def time_step(step, device: str, repeats: int) -> tuple[float, float | None]:
    """Median seconds of ``step()`` over ``repeats`` calls after one warm-up, and the peak
    memory of those calls (MiB: CUDA allocator peak on GPU, RSS growth on CPU)."""
    step()
    if device.startswith("cuda"):
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    rss = reset_peak_rss()
    times = []
    for _ in range(repeats):
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        start = time.perf_counter()
        step()
        if device.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    if device.startswith("cuda"):
        peak = (torch.cuda.max_memory_allocated() - base) / 2**20
    else:
        peak = peak_rss_growth_mb(rss)
    return statistics.median(times), peak


def energy_forces_stress_step(potential, graph):
    """One training-like step of ``potential`` on ``graph``: forward with forces and stress
    (a first derivative in the graph), then the backward of a loss on all three (the second)."""

    def step():
        out = potential(graph, compute_forces=True, compute_stress=True, training=True)
        loss = out["energy"].pow(2).sum() + out["forces"].pow(2).sum() + out["stress"].pow(2).sum()
        loss.backward()

    return step
