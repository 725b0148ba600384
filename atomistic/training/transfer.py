"""Fine-tuning a trained MACE-class potential onto a changed model: new elements (its
function on the old ones kept exactly; the new ones start from fresh weights) or new cutoffs
for some elements (its function on the others kept).
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence

import torch

from atomistic.models.builders import build_potential


def extend_species(potential, new_numbers: Sequence[int], new_e0s: Mapping[int, float]):
    """A copy of ``potential`` that also supports ``new_numbers`` (appended to its species).

    Species-dependent weights (embedding, product-basis species weights, species-wise
    residuals, E0s) get the old species' values; e3nn's fan-in normalisation over the one-hot
    species input is compensated, so predictions on old-element structures are unchanged.
    """
    old = tuple(potential.atomic_numbers)
    added = [int(z) for z in new_numbers if int(z) not in old]
    if not added:
        return potential
    missing = [z for z in added if z not in new_e0s]
    if missing:
        raise ValueError(f"no reference energy (E0) for new element(s) {missing}")
    architecture = copy.deepcopy(potential.metadata.architecture)
    if architecture["encoder"]["name"] != "mace":
        raise ValueError("adding elements is implemented for the MACE-class encoder")
    encoder_config = architecture["encoder"]["config"]
    encoder_config["species"] = list(old) + added
    if encoder_config.get("species_cutoffs") is not None:  # new elements see as far as the graph
        encoder_config["species_cutoffs"] = list(encoder_config["species_cutoffs"]) + [encoder_config["cutoff"]] * len(added)
    grown = _rebuilt(potential, architecture)
    n_old, n_new = len(old), len(old) + len(added)
    fan_in_factor = math.sqrt(n_new / n_old)  # e3nn normalises species-input weights by 1/sqrt(n_species)
    old_state = potential.state_dict()
    new_state = grown.state_dict()
    modules = dict(grown.named_modules())
    with torch.no_grad():
        for key, target in new_state.items():
            if "._compiled_main" in key or key not in old_state:
                continue
            source = old_state[key]
            if key == "encoder.embedding.weight":
                target.view(n_new, -1)[:n_old] = source.view(n_old, -1) * fan_in_factor
            elif key.endswith(".weights") and ".weigh" in key:  # SpeciesWeightedSum [n_species, paths, C]
                target[:n_old] = source
            elif key.endswith("residual.weight"):
                _copy_species_tensor_product(modules[key.rsplit(".", 1)[0]], source, target, n_old, n_new, fan_in_factor)
            elif key == "heads.energy.e0s":
                target[:n_old] = source
                target[n_old:] = torch.tensor([float(new_e0s[z]) for z in added], dtype=target.dtype)
            elif key == "heads.energy.scale" and source.dim() == 1:  # per-species scale
                target[:n_old] = source
                target[n_old:] = source.mean()  # new elements: the old ones' mean
            elif source.shape == target.shape:
                target.copy_(source)
            else:
                raise ValueError(f"cannot carry '{key}' over: shape {tuple(source.shape)} -> {tuple(target.shape)}")
    grown.load_state_dict(new_state)
    return grown


def _rebuilt(potential, architecture):
    """A fresh potential of ``architecture`` with ``potential``'s backend, name, dtype, device
    and provenance (the weights are the caller's to carry over)."""
    rebuilt = build_potential(
        architecture, backend=potential.metadata.backend, name=potential.metadata.name, dtype=potential.dtype, device=potential.device
    )
    rebuilt.metadata.provenance = dict(potential.metadata.provenance)
    return rebuilt


def _copy_species_tensor_product(module, source, target, n_old, n_new, factor) -> None:
    """FullyConnectedTensorProduct(h, one-hot species): per path ``[mul_h, n_species, mul_out]``."""
    start_old = start_new = 0
    for instruction in module.instructions:
        mul1, _, mul_out = instruction.path_shape
        size_old, size_new = mul1 * n_old * mul_out, mul1 * n_new * mul_out
        block_old = source[start_old : start_old + size_old].view(mul1, n_old, mul_out)
        target[start_new : start_new + size_new].view(mul1, n_new, mul_out)[:, :n_old] = block_old * factor
        start_old += size_old
        start_new += size_new


def change_species_cutoffs(potential, cutoffs: Mapping[int, float]):
    """A copy of ``potential`` whose elements in ``cutoffs`` (atomic number → Å) see that far.

    The other elements keep their cutoffs; the graph cutoff becomes the largest. Every weight
    is carried over: the Bessel frequencies are set for the new graph cutoff (each edge's basis
    is still the one of its own cutoff) and the radial networks' first layers are rescaled for
    the new normalisation, so structures made only of elements whose cutoff is unchanged are
    predicted as before (an edge to a changed element reaches the new mean cutoff).
    ``avg_num_neighbors`` is kept. Fine-tuning then teaches the changed elements their longer
    (or shorter) edges.
    """
    architecture = copy.deepcopy(potential.metadata.architecture)
    if architecture["encoder"]["name"] != "mace":
        raise ValueError("per-element cutoffs are implemented for the MACE-class encoder")
    encoder_config = architecture["encoder"]["config"]
    species = [int(z) for z in encoder_config["species"]]
    unknown = sorted(set(int(z) for z in cutoffs) - set(species))
    if unknown:
        raise ValueError(f"species cutoffs for elements the model does not have: {unknown}")
    old = encoder_config.get("species_cutoffs") or [encoder_config["cutoff"]] * len(species)
    new = [float(cutoffs.get(z, radius)) for z, radius in zip(species, old, strict=True)]
    if new == [float(r) for r in old]:
        return potential
    if any(r <= 0 for r in new):
        raise ValueError(f"species cutoffs must be positive (Å), got {new}")
    encoder_config["cutoff"] = max(new)
    encoder_config["species_cutoffs"] = new
    changed = _rebuilt(potential, architecture)
    # e3nn's FullyConnectedNet divides its first layer by sqrt(fan_in * variance_in), and the
    # mean square of the radial embedding depends on the graph cutoff
    factor = math.sqrt(changed.encoder.radial.mean_square() / potential.encoder.radial.mean_square())
    old_state = potential.state_dict()
    new_state = changed.state_dict()
    with torch.no_grad():
        for key, target in new_state.items():
            if "._compiled_main" in key or key not in old_state or key.endswith("basis.frequencies"):
                continue
            source = old_state[key]
            target.copy_(source * factor if key.endswith("radial_mlp.layer0.weight") else source)
    changed.load_state_dict(new_state)
    return changed
