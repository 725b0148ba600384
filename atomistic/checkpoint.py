"""Self-describing checkpoints: ``manifest.json`` + ``weights.safetensors``. Never pickle.

A checkpoint is a directory::

    <name>/manifest.json        format version, architecture, species, cutoff, E0s, units,
                                provenance, held-out metrics, code version
    <name>/weights.safetensors  the state dict (tensors only)
    <name>/MODEL_CARD.md        human-readable description (optional)

A committee (:class:`~atomistic.models.committee.Committee`) is a directory whose manifest's
``architecture`` is ``{"committee": {"members": [paths], "weights": [...]}}`` and whose
members are ordinary checkpoints in the sub-directories named there (``members/<name>``).

Names without a path separator (``"default"``) resolve to ``checkpoints/<name>`` in the
directory named by ``ATOMISTIC_CHECKPOINTS`` or, by default, the project's ``checkpoints/``;
``checkpoints/aliases.json`` maps alias names (``default``) onto checkpoint names.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import zipfile
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

FORMAT_VERSION = 1
SUPPORTED_FORMAT_VERSIONS = (1,)
MANIFEST = "manifest.json"
ALIASES = "aliases.json"
WEIGHTS = "weights.safetensors"
COMMITTEE = "committee"  # the architecture key of a committee's manifest
COMMITTEE_MEMBERS = "members"  # the sub-directory that holds a committee's member checkpoints
_PICKLE_SUFFIXES = (".pt", ".pth", ".pkl", ".pickle", ".ckpt", ".model", ".bin")


class CheckpointError(ValueError):
    """A checkpoint that cannot or must not be loaded."""


def checkpoints_dir() -> Path:
    env = os.environ.get("ATOMISTIC_CHECKPOINTS")
    if env:
        return Path(env)
    return Path(__file__).resolve().parent.parent / "checkpoints"


def resolve(name_or_path: str | os.PathLike) -> Path:
    """A model name (``default``) or a path → the checkpoint directory."""
    text = str(name_or_path)
    path = Path(text)
    if path.exists():
        return path
    if os.sep not in text and "/" not in text and not text.startswith("."):
        text = aliases().get(text, text)
        candidate = checkpoints_dir() / text
        if candidate.exists():
            return candidate
        available = sorted(p.name for p in checkpoints_dir().glob("*") if (p / MANIFEST).exists())
        raise CheckpointError(f"no model named '{text}' in {checkpoints_dir()}; available: {available}")
    raise CheckpointError(f"checkpoint '{text}' does not exist")


def resolve_recorded(name_or_path: str | os.PathLike, root: str | os.PathLike) -> Path | None:
    """A name or path recorded in a manifest (a run's ``--init``) → the checkpoint directory,
    resolved as :func:`resolve` resolves it, first as given and then relative to ``root`` (the
    directory the run was started from); None where neither exists any more."""
    for candidate in (name_or_path, Path(root) / name_or_path):
        try:
            return resolve(candidate)
        except CheckpointError:
            continue
    return None


def aliases() -> dict[str, str]:
    """Alias name → checkpoint name, from ``checkpoints/aliases.json`` (empty if absent)."""
    path = checkpoints_dir() / ALIASES
    if not path.exists():
        return {}
    return {str(k): str(v) for k, v in json.loads(path.read_text()).items()}


def _looks_like_pickle(path: Path) -> bool:
    if path.suffix.lower() in _PICKLE_SUFFIXES:
        return True
    try:
        with open(path, "rb") as fh:
            head = fh.read(2)
    except OSError:
        return False
    return (len(head) == 2 and head[0] == 0x80 and head[1] <= 5) or zipfile.is_zipfile(path)


def read_manifest(directory: Path) -> dict[str, Any]:
    manifest_path = directory / MANIFEST
    if not manifest_path.exists():
        raise CheckpointError(f"'{directory}' has no {MANIFEST}; a checkpoint is a directory with {MANIFEST} and {WEIGHTS}")
    try:
        manifest = json.loads(manifest_path.read_text())
    except json.JSONDecodeError as err:
        raise CheckpointError(f"{manifest_path} is not valid JSON: {err}") from None
    version = manifest.get("format_version")
    if version not in SUPPORTED_FORMAT_VERSIONS:
        raise CheckpointError(
            f"{manifest_path}: unknown checkpoint format_version {version!r}; this atomistic reads "
            f"{list(SUPPORTED_FORMAT_VERSIONS)}"
        )
    for field in ("architecture", "species", "cutoff"):
        if field not in manifest:
            raise CheckpointError(f"{manifest_path}: missing field '{field}'")
    return manifest


def encoder_name(architecture: dict[str, Any]) -> str:
    """The encoder a manifest's ``architecture`` names, or ``committee of N`` for a committee."""
    if COMMITTEE in architecture:
        return f"committee of {len(architecture[COMMITTEE].get('members', []))}"
    return architecture["encoder"]["name"]


def load_potential(
    name_or_path: str | os.PathLike = "default",
    device: str | torch.device = "cpu",
    dtype: str | torch.dtype = torch.float64,
    backend: str | None = "auto",
):
    """Load a :class:`~atomistic.models.potential.Potential` from a checkpoint directory or name.

    ``backend`` names the kernel backend (``"auto"``: the fastest correct one for ``device``
    and ``dtype``; ``None`` means ``"auto"``).  Refuses pickle files (``.pt``, ``.pth``, ...) and unknown format versions with a
    :class:`CheckpointError` that says why.
    """
    from atomistic.models.builders import build_potential

    dtype = _as_dtype(dtype)
    path = Path(name_or_path) if Path(str(name_or_path)).exists() else None
    if path is not None and path.is_file():
        if _looks_like_pickle(path):
            raise CheckpointError(
                f"refusing to load '{path}': it is a pickle (torch.save) file, and unpickling can run "
                "arbitrary code. atomistic checkpoints are directories with manifest.json + "
                "weights.safetensors; convert trusted weights with an explicit import step."
            )
        if path.name == MANIFEST:
            path = path.parent
        else:
            raise CheckpointError(f"'{path}' is a file; pass the checkpoint directory that holds {MANIFEST}")
    directory = resolve(name_or_path) if path is None else path
    manifest = read_manifest(directory)
    if COMMITTEE in manifest["architecture"]:
        return _load_committee(directory, manifest, device=device, dtype=dtype, backend=backend)
    weights_path = directory / WEIGHTS
    if not weights_path.exists():
        pickles = [p.name for p in directory.iterdir() if p.suffix.lower() in _PICKLE_SUFFIXES]
        hint = f" (found pickle file(s) {pickles}, which are refused)" if pickles else ""
        raise CheckpointError(f"'{directory}' has no {WEIGHTS}{hint}")
    potential = build_potential(
        manifest["architecture"],
        backend=backend or "auto",
        name=manifest.get("name", directory.name),
        dtype=dtype,
        device=device,
    )
    state = {k: v for k, v in load_file(str(weights_path)).items() if not is_derived_constant(k)}
    missing, unexpected = potential.load_state_dict(state, strict=False)
    missing = [k for k in missing if not is_derived_constant(k)]
    if missing or unexpected:
        raise CheckpointError(
            f"{weights_path} does not match its architecture: missing {sorted(missing)[:5]}, "
            f"unexpected {sorted(unexpected)[:5]}"
        )
    potential.metadata.provenance = manifest.get("provenance", {})
    potential.metadata.metrics = manifest.get("metrics", {})
    potential.metadata.units = manifest.get("units", potential.metadata.units)
    potential.eval()
    for p in potential.parameters():
        p.requires_grad_(False)
    return potential.to(device=device, dtype=dtype)


def save_checkpoint(
    potential,
    directory: str | os.PathLike,
    *,
    provenance: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
    weights_dtype: torch.dtype = torch.float32,
) -> Path:
    """Write ``manifest.json`` and ``weights.safetensors`` for ``potential`` into ``directory``."""
    from atomistic import __version__
    from atomistic.models.heads.energy import FLOAT64_BUFFERS

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {
        k: _saved_tensor(v, weights_dtype, float64=k.rsplit(".", 1)[-1] in FLOAT64_BUFFERS).contiguous().cpu()
        for k, v in potential.state_dict().items()
        if not is_derived_constant(k)
    }
    # each file is written whole or not at all (a run killed mid-save keeps the previous one)
    _replace_atomically(directory / WEIGHTS, lambda path: save_file(state, str(path)))
    head = potential.heads["energy"] if potential.has_energy else None
    manifest = {
        "format_version": FORMAT_VERSION,
        "name": potential.metadata.name,
        "architecture": potential.metadata.architecture,
        "species": list(potential.atomic_numbers),
        "cutoff": potential.cutoff,
        # informational copies of the energy head's normalisation (the weights hold them too)
        **(
            {
                "e0s": {str(z): float(e) for z, e in zip(potential.atomic_numbers, head.e0s.tolist(), strict=True)},
                "scale": head.scale.tolist(),
                "shift": head.shift.tolist(),
            }
            if head is not None
            else {}
        ),
        "properties": list(potential.properties),
        "units": potential.metadata.units,
        "weights_dtype": str(weights_dtype).replace("torch.", ""),
        "provenance": provenance if provenance is not None else potential.metadata.provenance,
        "metrics": metrics if metrics is not None else potential.metadata.metrics,
        "code_version": __version__,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    text = json.dumps(manifest, indent=2, ensure_ascii=False) + "\n"
    _replace_atomically(directory / MANIFEST, lambda path: path.write_text(text))
    return directory


def _load_committee(directory: Path, manifest: dict[str, Any], **load_options):
    """The :class:`~atomistic.models.committee.Committee` that ``directory``'s manifest describes."""
    from atomistic.models.committee import Committee
    from atomistic.models.potential import PotentialMetadata

    spec = manifest["architecture"][COMMITTEE]
    members = []
    for relative in spec.get("members", []):
        member_dir = (directory / relative).resolve()
        if directory.resolve() not in member_dir.parents:
            raise CheckpointError(f"{directory / MANIFEST}: committee member '{relative}' lies outside the checkpoint")
        if not (member_dir / MANIFEST).exists():
            raise CheckpointError(f"{directory / MANIFEST}: committee member '{relative}' has no {MANIFEST}")
        members.append(load_potential(member_dir, **load_options))
    metadata = PotentialMetadata(
        name=manifest.get("name", directory.name),
        architecture=manifest["architecture"],
        units=manifest.get("units", PotentialMetadata().units),
        provenance=manifest.get("provenance", {}),
        metrics=manifest.get("metrics", {}),
        backend=members[0].metadata.backend if members else "reference",
    )
    try:
        committee = Committee(members, spec.get("weights"), metadata)
    except ValueError as error:
        raise CheckpointError(f"{directory / MANIFEST}: {error}") from None
    return committee.eval()


def save_committee(
    member_directories: list[str | os.PathLike],
    directory: str | os.PathLike,
    *,
    name: str | None = None,
    weights: list[float] | None = None,
    provenance: dict[str, Any] | None = None,
    metrics: dict[str, Any] | None = None,
) -> Path:
    """Write a committee checkpoint into ``directory`` (replacing what is there): each member
    checkpoint's manifest and weights copied into ``members/<its directory name>``, and the
    committee's manifest. The members are loaded first, so a committee that would not load is
    never written, and a member may be the checkpoint that ``directory`` held before."""
    import shutil

    from atomistic import __version__
    from atomistic.models.committee import Committee

    sources = [Path(m) for m in member_directories]
    names = [s.resolve().name for s in sources]
    if len(set(names)) != len(names):
        raise CheckpointError(f"committee members need distinct directory names, got {names}")
    committee = Committee([load_potential(s) for s in sources], weights)  # raises on a bad combination
    directory = Path(directory)
    # assembled beside the target and moved over it last: a member may live in the directory it replaces
    staging = directory.with_name(directory.name + ".committee-tmp")
    if staging.exists():
        shutil.rmtree(staging)
    for source, member_name in zip(sources, names, strict=True):
        target = staging / COMMITTEE_MEMBERS / member_name
        target.mkdir(parents=True)
        for file in (MANIFEST, WEIGHTS):
            shutil.copy2(source / file, target / file)
    manifest = {
        "format_version": FORMAT_VERSION,
        "name": name or directory.name,
        "architecture": {
            COMMITTEE: {"members": [f"{COMMITTEE_MEMBERS}/{n}" for n in names], "weights": committee.weights},
        },
        "species": list(committee.atomic_numbers),
        "cutoff": committee.cutoff,
        "properties": list(committee.properties),
        "units": committee.members[0].metadata.units,
        "provenance": provenance or {},
        "metrics": metrics or {},
        "code_version": __version__,
        "created": _dt.datetime.now(_dt.UTC).isoformat(timespec="seconds"),
    }
    (staging / MANIFEST).write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    if directory.exists():
        shutil.rmtree(directory)
    os.replace(staging, directory)
    return directory


def _saved_tensor(tensor: torch.Tensor, weights_dtype: torch.dtype, *, float64: bool) -> torch.Tensor:
    """A floating-point tensor as ``weights_dtype``, or as float64 where ``float64`` (the energy
    heads' isolated-atom references, ``FLOAT64_BUFFERS``: float32 rounds them by up to 0.1 meV
    per atom)."""
    tensor = tensor.detach()
    if not tensor.is_floating_point():
        return tensor
    return tensor.to(torch.float64 if float64 else weights_dtype)


def _replace_atomically(target: Path, write) -> None:
    """``write(tmp)`` then rename ``tmp`` over ``target`` (atomic on POSIX file systems)."""
    tmp = target.with_name(target.name + ".tmp")
    write(tmp)
    os.replace(tmp, target)


def is_derived_constant(key: str) -> bool:
    """State that follows from the architecture and the kernel backend, not from training:
    everything inside a kernel-backend module (``….convolution.…``, ``….contraction.…``,
    ``….backend_kernel.…``:
    backends hold no parameters, only index and Clebsch–Gordan tables for their own layout),
    e3nn's compiled Clebsch–Gordan blocks (``._compiled_main*``), its ``output_mask`` and the
    empty ``weight`` placeholders of tensor products without internal weights.  It is rebuilt
    exactly in the loading dtype and for the loading backend, and never stored: a float32 copy
    loaded into a float64 model would break equivariance at the 1e-9 level, and a checkpoint
    must load on every backend."""
    return (
        ".convolution." in key
        or ".contraction." in key
        or ".backend_kernel." in key
        or "._compiled_main" in key
        or key.endswith(".output_mask")
        or key.endswith((".product2.weight", ".product3.weight"))
    )


def _as_dtype(dtype: str | torch.dtype) -> torch.dtype:
    if isinstance(dtype, torch.dtype):
        return dtype
    table = {"float32": torch.float32, "float64": torch.float64, "float": torch.float32, "double": torch.float64}
    if dtype not in table:
        raise ValueError(f"dtype must be 'float32' or 'float64', got {dtype!r}")
    return table[dtype]
