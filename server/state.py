"""What the app holds while it runs (created in the lifespan, kept in ``app.state.server``)."""

from __future__ import annotations

import dataclasses
from typing import Any

from server.batching import MicroBatcher
from server.config import Settings
from server.metrics import ServerMetrics


@dataclasses.dataclass
class ServerState:
    settings: Settings
    metrics: ServerMetrics
    potentials: dict = dataclasses.field(default_factory=dict)
    batchers: dict[str, MicroBatcher] = dataclasses.field(default_factory=dict)
    jobs: Any = None  # server.jobs.JobStore
    job_runner: Any = None  # server.jobs.JobRunner
    ready: bool = False
    shutting_down: bool = False
