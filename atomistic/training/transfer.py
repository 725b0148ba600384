"""Fine-tuning a trained MACE-class potential onto a changed model: new elements (its
function on the old ones kept exactly; the new ones start from fresh weights), new cutoffs
for some elements (its function on the others kept) or more channels (its function kept);
and, for any potential with an energy head, new reference energies for new data.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Mapping, Sequence

import torch
from e3nn import o3

from atomistic.models.builders import build_potential
from atomistic.nn.interaction import Interaction
from atomistic.nn.product_basis import SpeciesPathWeights


def extend_species(potential, new_numbers: Sequence[int], new_e0s: Mapping[int, float]):
    """A copy of ``potential`` that also supports ``new_numbers`` (appended to its species).

    Species-dependent weights (embedding, product-basis species weights, species-wise
    residuals, E0s) get the old species' values; e3nn's fan-in normalisation over the one-hot
    species input is compensated (the same block walk as :func:`widen_channels`), so
    predictions on old-element structures are unchanged.
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
    n_old = len(old)
    old_state = potential.state_dict()
    new_state = grown.state_dict()
    old_modules, new_modules = dict(potential.named_modules()), dict(grown.named_modules())
    with torch.no_grad():
        for key, target in new_state.items():
            if "._compiled_main" in key or key not in old_state:
                continue
            source = old_state[key]
            if key == "encoder.embedding.weight" or key.endswith("residual.weight"):
                # Linear(one-hot species) and FullyConnectedTensorProduct(h, one-hot species):
                # the species axis grows, the new species' weights stay fresh
                name = key.rsplit(".", 1)[0]
                _widen_path_weights(old_modules[name], new_modules[name], source, target, zero_new_inputs=False)
            elif isinstance(new_modules.get(key.rsplit(".", 1)[0]), SpeciesPathWeights):  # [n_species, paths, C]
                target[:n_old] = source
            elif key == "heads.energy.e0s":
                target[:n_old] = source
                target[n_old:] = torch.tensor([float(new_e0s[z]) for z in added], dtype=target.dtype)
            elif key == "heads.energy.scale" and source.dim() == 1:  # per-species scale
                target[:n_old] = source
                target[n_old:] = source.mean()  # new elements: the old ones' mean
            else:
                _carry_unchanged(key, source, target)
    grown.load_state_dict(new_state)
    return grown


def _carry_unchanged(key: str, source: torch.Tensor, target: torch.Tensor) -> None:
    """Copy a weight that the change left as it was; a changed shape that no rule of the
    change handled is an error naming the weight."""
    if source.shape != target.shape:
        raise ValueError(f"cannot carry '{key}' over: shape {tuple(source.shape)} -> {tuple(target.shape)}")
    target.copy_(source)


def _rebuilt(potential, architecture):
    """A fresh potential of ``architecture`` with ``potential``'s backend, name, dtype, device
    and provenance (the weights are the caller's to carry over)."""
    rebuilt = build_potential(
        architecture, backend=potential.metadata.backend, name=potential.metadata.name, dtype=potential.dtype, device=potential.device
    )
    rebuilt.metadata.provenance = dict(potential.metadata.provenance)
    return rebuilt


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


def widen_channels(potential, channels: int):
    """A copy of ``potential`` (MACE-class encoder, energy head) with ``channels`` channels,
    predicting exactly what ``potential`` predicts.

    Every weight that maps old channels to old channels is carried over (rescaled for e3nn's
    fan-in normalisation, which now counts the new inputs); the weights that read a new
    channel start at zero and the weights that write one keep their fresh initialisation.
    The new channels therefore compute features from the first step but contribute nothing
    until training moves the zero weights, which get gradients at once (their inputs are not
    zero). Channel-wise weights (convolution paths from the radial MLP, product-basis species
    weights) of the new channels are fresh as well.
    """
    architecture = copy.deepcopy(potential.metadata.architecture)
    if architecture["encoder"]["name"] != "mace":
        raise ValueError("widening is implemented for the MACE-class encoder")
    extra_heads = sorted(set(architecture["heads"]) - {"energy"})
    if extra_heads:
        raise ValueError(f"widening is implemented for the energy head alone; this model also has {extra_heads}")
    encoder_config = architecture["encoder"]["config"]
    old_channels = int(encoder_config["channels"])
    if channels == old_channels:
        return potential
    if channels < old_channels:
        raise ValueError(f"cannot narrow a model: it has {old_channels} channels, asked for {channels}")
    encoder_config["channels"] = int(channels)
    wide = _rebuilt(potential, architecture)
    old_modules = dict(potential.named_modules())
    old_state = potential.state_dict()
    new_state = wide.state_dict()
    done: set[str] = set()
    with torch.no_grad():
        for name, module in wide.named_modules():
            if isinstance(module, o3.Linear | o3.TensorProduct) and module.weight.numel() > 0:
                _widen_path_weights(old_modules[name], module, old_state[f"{name}.weight"], new_state[f"{name}.weight"])
                done.add(f"{name}.weight")
            elif isinstance(module, Interaction):
                key = f"{name}.radial_mlp.layer{len(module.radial_mlp.hs) - 2}.weight"
                _widen_radial_output(old_modules[name].spec, module.spec, old_state[key], new_state[key])
                done.add(key)
            elif isinstance(module, SpeciesPathWeights):
                new_state[f"{name}.weights"][..., :old_channels] = old_state[f"{name}.weights"]
                done.add(f"{name}.weights")
        head = "heads.energy."
        layers = int(encoder_config["num_layers"])
        readout = new_state[head + "linear_readout.weight"].view(1, layers, channels)
        readout.zero_()[..., :old_channels] = old_state[head + "linear_readout.weight"].view(1, layers, old_channels)
        mlp_in = new_state[head + "mlp_readout.0.weight"]
        mlp_in.zero_()[:, :old_channels] = old_state[head + "mlp_readout.0.weight"]
        done |= {head + "linear_readout.weight", head + "mlp_readout.0.weight"}
        for key, target in new_state.items():
            if key in done or "._compiled_main" in key or key.endswith("output_mask"):
                continue  # e3nn's output masks are derived from the (new) irreps
            _carry_unchanged(key, old_state[key], target)
    wide.load_state_dict(new_state)
    return wide


def _widen_path_weights(old_module, new_module, source, target, *, zero_new_inputs: bool = True) -> None:
    """e3nn ``Linear`` / ``TensorProduct`` weights, one ``path_shape`` block per instruction
    (the last axis the output multiplicity, the others inputs, e.g. ``[mul_h, n_species,
    mul_out]``): the old block goes into the leading corner, times the ratio of the paths'
    normalisations (e3nn's fan-in counts the grown axes). The weights that read a new input
    are zeroed (``zero_new_inputs``) or keep their fresh values; those that write a new
    output keep their fresh values."""
    start_old = start_new = 0
    for old, new in zip(old_module.instructions, new_module.instructions, strict=True):
        if not getattr(new, "has_weight", True):
            continue
        size_old, size_new = math.prod(old.path_shape), math.prod(new.path_shape)
        block_new = target[start_new : start_new + size_new].view(new.path_shape)
        corner = tuple(slice(0, m) for m in old.path_shape)
        if zero_new_inputs:  # old outputs read nothing from new inputs; new outputs stay fresh
            block_new[..., : old.path_shape[-1]].zero_()
        block_new[corner] = source[start_old : start_old + size_old].view(old.path_shape) * (old.path_weight / new.path_weight)
        start_old += size_old
        start_new += size_new
    if start_old != source.numel() or start_new != target.numel():
        raise ValueError("unexpected weight layout while widening")


def _widen_radial_output(old_spec, new_spec, source, target) -> None:
    """The radial MLP's last layer ``[hidden, weight_numel]``: per convolution path, one
    column per channel (edge multiplicity 1); old channels keep their columns."""
    start_old = start_new = 0
    for (i_old, j_old, _), (i_new, j_new, _) in zip(old_spec.paths, new_spec.paths, strict=True):
        size_old = o3.Irreps(old_spec.irreps_node)[i_old].mul * o3.Irreps(old_spec.irreps_edge)[j_old].mul
        size_new = o3.Irreps(new_spec.irreps_node)[i_new].mul * o3.Irreps(new_spec.irreps_edge)[j_new].mul
        target[:, start_new : start_new + size_old] = source[:, start_old : start_old + size_old]
        start_old += size_old
        start_new += size_new


def refit_reference_energies(
    potential, structures: Sequence, isolated_atoms: Sequence = (), batch_atoms: int = 2048
) -> dict[int, float]:
    """Shift ``potential``'s per-element reference energies (the energy head's E0s, in place)
    onto this data's energy zero.

    A model trained on another DFT setup (code, pseudopotentials, functional: a pretrained
    universal potential fine-tuned on new data) differs from the new labels mostly by a
    constant per element; fitting that constant first leaves the fine-tune the differences
    in shape. With ``isolated_atoms`` (single-atom structures with energy labels, eV) each of
    their elements is first shifted so that the model's isolated atom has that energy: the
    absolute zero per element, which a data set of one composition (one molecule) cannot
    separate by element. Then the least-squares fit of ``structures``' energy labels minus the
    predictions (minimum-norm where the compositions leave it open) is added. The elements that
    neither lists hold keep their E0s. Returns the total shift per atomic number (eV per atom).
    Raises ``ValueError`` when the potential has no energy head, no structure carries an energy
    label or an isolated atom's element is not the potential's.
    """
    from atomistic.training.statistics import least_squares_e0s

    if "energy" not in potential.heads:
        raise ValueError("the potential has no energy head")
    labelled = [s for s in structures if "energy" in s.labels]
    if not labelled:
        raise ValueError("no training structure carries an energy label")
    index = {int(z): k for k, z in enumerate(potential.atomic_numbers)}
    e0s = potential.heads["energy"].e0s
    was_training = potential.training
    potential.eval()
    total: dict[int, float] = {}

    def residuals_of(items):
        predictions = potential.predict(items, properties=["energy"], max_atoms_per_batch=batch_atoms)
        return [float(s.labels["energy"]) - float(p["energy"]) for s, p in zip(items, predictions, strict=True)]

    try:
        atoms = [s for s in isolated_atoms if len(s) == 1 and "energy" in s.labels]
        unknown = sorted({int(s.numbers[0]) for s in atoms} - set(index))
        if unknown:
            raise ValueError(f"isolated atoms of elements the potential lacks: {unknown}")
        with torch.no_grad():
            for atom, residual in zip(atoms, residuals_of(atoms), strict=True):
                z = int(atom.numbers[0])
                e0s[index[z]] += residual
                total[z] = total.get(z, 0.0) + residual
        residuals = [
            dataclasses.replace(s, labels={"energy": residual}) for s, residual in zip(labelled, residuals_of(labelled), strict=True)
        ]
    finally:
        potential.train(was_training)
    numbers = sorted({int(z) for s in labelled for z in s.numbers})
    with torch.no_grad():
        for z, shift in zip(numbers, least_squares_e0s(residuals, numbers), strict=True):
            e0s[index[z]] += float(shift)
            total[z] = total.get(z, 0.0) + float(shift)
    return total


def restrict_species(potential, numbers: Sequence[int]):
    """A copy of ``potential`` (NequIP-class encoder with linear self-connections, as the
    imported SevenNet models) that supports only ``numbers``, predicting on them exactly what
    ``potential`` predicts.

    A universal model fine-tuned on a few elements has changed shared weights whose effect on
    its other elements nobody measured; dropping those elements makes the model refuse them
    (an error naming the element) instead of answering with unvalidated numbers. The one-hot
    embedding keeps the kept species' rows, rescaled for e3nn's fan-in normalisation over the
    shorter one-hot input; the energy head keeps their E0s and scales.
    """
    old = [int(z) for z in potential.atomic_numbers]
    wanted = {int(n) for n in numbers}
    keep = [z for z in old if z in wanted]
    missing = sorted(wanted - set(old))
    if missing:
        raise ValueError(f"the model has no element(s) {missing}")
    if not keep:
        raise ValueError("no element left to keep")
    if keep == old:
        return potential
    architecture = copy.deepcopy(potential.metadata.architecture)
    encoder_config = architecture["encoder"]["config"]
    if architecture["encoder"]["name"] != "nequip" or encoder_config.get("self_connection", "linear") != "linear":
        raise ValueError("dropping elements is implemented for the NequIP-class encoder with linear self-connections")
    encoder_config["species"] = keep
    rows = torch.tensor([old.index(z) for z in keep])
    restricted = _rebuilt(potential, architecture)
    old_state, new_state = potential.state_dict(), restricted.state_dict()
    with torch.no_grad():
        for key, target in new_state.items():
            if "._compiled_main" in key:
                continue
            source = old_state[key]
            if key == "encoder.embedding.weight":  # Linear(one-hot species): [n_species * dim], species-major
                weight = source.view(len(old), -1)[rows] * math.sqrt(len(keep) / len(old))
                target.copy_(weight.reshape(-1))
            elif key.startswith("heads.energy.") and source.dim() == 1 and source.shape[0] == len(old):
                target.copy_(source[rows])  # e0s, per-species scale
            else:
                _carry_unchanged(key, source, target)
    restricted.load_state_dict(new_state)
    return restricted
