"""Streaming, resumable batch scoring: the core of ``atomistic score`` and of the server's
durable jobs.

Inputs are read one structure at a time (extxyz or JSON lines: one structure object per line),
scored in chunks, and written as JSON lines (``{"index": i, "energy": …}`` or
``{"index": i, "error": "…"}``), in input order.  After each chunk the results file is
flushed and fsync'd and only then is the progress (structures done, bytes of results)
committed; a restarted run truncates the results file to the committed size and skips the
committed structures, so no result is lost and none is written twice.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np

from atomistic.data.convert import (
    DEFAULT_MAX_ATOMS,
    StructureError,
    as_structure,
    validate_structure,
)
from atomistic.runtime import each_alone
from atomistic.voigt import with_voigt_forms

INPUT_FORMATS = ("extxyz", "jsonl")


def input_format(path: str | os.PathLike, format: str | None = None) -> str:
    """``extxyz`` (``.extxyz``/``.xyz``) or ``jsonl`` (``.jsonl``/``.ndjson``)."""
    if format is not None:
        if format not in INPUT_FORMATS:
            raise ValueError(f"format must be one of {INPUT_FORMATS}, got '{format}'")
        return format
    name = str(path).lower()
    if name.endswith((".extxyz", ".xyz")):
        return "extxyz"
    if name.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    raise ValueError(f"cannot tell the format of '{path}': use .extxyz/.xyz or .jsonl, or pass the format")


def iter_inputs(path: str | os.PathLike, format: str, skip: int = 0) -> Iterator[tuple[int, Any]]:
    """``(index, item)`` for every structure of the file after the first ``skip``; an item is
    an ``ase.Atoms``, a dict, or a :class:`StructureError` for a line that is not JSON.  Reads
    one structure at a time (files larger than memory are fine)."""
    if format == "jsonl":
        with open(path, encoding="utf-8") as handle:
            index = 0
            for line in handle:
                if not line.strip():
                    continue
                if index >= skip:
                    try:
                        yield index, json.loads(line)
                    except json.JSONDecodeError as err:
                        yield index, StructureError(index, "line", f"not valid JSON ({err.msg})")
                index += 1
        return
    import ase.io

    for index, atoms in enumerate(ase.io.iread(str(path), index=":", format="extxyz")):
        if index >= skip:
            yield index, atoms


def count_inputs(path: str | os.PathLike, format: str) -> int:
    """Number of structures in the file (one pass).

    Raises:
        ValueError: an extxyz frame header that is not an atom count, or that declares more
            atoms than the file holds lines (checked here, before ASE reads the frame).
    """
    if format == "jsonl":
        with open(path, encoding="utf-8") as handle:
            return sum(1 for line in handle if line.strip())
    count = 0
    with open(path, encoding="utf-8") as handle:
        while True:
            header = handle.readline()
            if not header:
                return count
            if not header.strip():
                continue
            n_atoms = int(header.split()[0])
            if n_atoms < 0:
                raise ValueError(f"frame {count} declares {n_atoms} atoms")
            for read in range(n_atoms + 1):
                if not handle.readline():
                    raise ValueError(f"frame {count} declares {n_atoms} atoms but the file ends {read} lines after its header")
            count += 1


def _to_json(value: Any) -> Any:
    return value.tolist() if isinstance(value, np.ndarray) else value


def score_chunk(potential, items: list[tuple[int, Any]], properties: tuple[str, ...], max_atoms: int = DEFAULT_MAX_ATOMS) -> list[dict]:
    """Score one chunk; a bad structure gets an ``error`` record and never fails the chunk (one
    that makes the model fail is found by rerunning the chunk one structure at a time)."""
    records: list[dict | None] = [None] * len(items)
    valid, positions = [], []
    for k, (index, item) in enumerate(items):
        try:
            if isinstance(item, StructureError):
                raise item
            valid.append(validate_structure(as_structure(item, index), index, supported_numbers=potential.atomic_numbers, max_atoms=max_atoms))
            positions.append(k)
        except StructureError as err:
            records[k] = {"index": index, "error": str(err)}
    if valid:
        try:
            results: list[Any] = potential.predict(valid, properties=properties)
        except Exception:  # noqa: BLE001 - rerun one by one: only the failing structure gets the error
            results = each_alone(lambda structures: potential.predict(structures, properties=properties), valid)
        for k, result in zip(positions, results, strict=True):
            if isinstance(result, Exception):
                records[k] = {"index": items[k][0], "error": f"inference failed: {type(result).__name__}: {result}"}
            else:
                records[k] = {"index": items[k][0], **{key: _to_json(v) for key, v in with_voigt_forms(result).items()}}
    return records  # type: ignore[return-value]


@dataclasses.dataclass
class Progress:
    """What is committed: structures done (in input order), failed among them, and the size
    of the results file that holds exactly their records."""

    done: int = 0
    failed: int = 0
    results_bytes: int = 0


class ResultsFile:
    """Append-only JSON-lines results with an explicit commit point."""

    def __init__(self, path: str | os.PathLike, committed_bytes: int):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.handle = open(self.path, "ab+")  # noqa: SIM115 - closed in close()
        self.handle.truncate(committed_bytes)  # drop anything written after the last commit
        self.handle.seek(committed_bytes)

    def append(self, records: list[dict]) -> int:
        """Write, flush and fsync ``records``; return the file size (the new commit point)."""
        self.handle.write("".join(json.dumps(r) + "\n" for r in records).encode())
        self.handle.flush()
        os.fsync(self.handle.fileno())
        return self.handle.tell()

    def close(self) -> None:
        self.handle.close()


def chunks_of(items: Iterator[tuple[int, Any]], size: int) -> Iterator[list[tuple[int, Any]]]:
    chunk: list[tuple[int, Any]] = []
    for item in items:
        chunk.append(item)
        if len(chunk) >= size:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def run_scoring(
    potential,
    input_path: str | os.PathLike,
    results_path: str | os.PathLike,
    *,
    format: str,
    properties: tuple[str, ...],
    progress: Progress,
    commit: Callable[[Progress], None],
    chunk_size: int = 64,
    should_stop: Callable[[], bool] = lambda: False,
    map_chunks: Callable[[Iterator[list]], Iterator[list[dict]]] | None = None,
) -> Progress:
    """Score ``input_path`` from ``progress.done`` on, chunk by chunk, committing after each.

    ``map_chunks`` turns the chunks of ``(index, item)`` into their records, in order
    (default: :func:`score_chunk` on ``potential`` in this process; the Ray engine scores
    chunks on remote model replicas).  ``should_stop`` is checked between chunks
    (cancellation, shutdown).  Returns the final progress.
    """
    if map_chunks is None:

        def map_chunks(chunks):
            return (score_chunk(potential, chunk, properties) for chunk in chunks)

    results = ResultsFile(results_path, progress.results_bytes)
    try:
        for records in map_chunks(chunks_of(iter_inputs(input_path, format, skip=progress.done), chunk_size)):
            size = results.append(records)
            progress = Progress(progress.done + len(records), progress.failed + sum("error" in r for r in records), size)
            commit(progress)
            if should_stop():
                break
        return progress
    finally:
        results.close()
