"""Parity plots (PNG) of predictions against reference labels."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from atomistic.data.convert import Structure
from atomistic.units import EV_PER_ANG3_TO_GPA


def parity_plots(potential, structures: Sequence[Structure], directory: str | Path) -> list[Path]:
    """Write ``parity_energy.png`` (eV/atom), ``parity_forces.png`` (eV/Å),
    ``parity_stress.png`` (GPa) and ``parity_<tensor>.png`` for each crystal tensor the model
    and labels share; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    predictions = potential.predict(list(structures))
    series = {"energy": ([], [], "energy (eV/atom)"), "forces": ([], [], "force components (eV/Å)"), "stress": ([], [], "stress components (GPa)")}
    units = {"dielectric_tensor": "", "piezoelectric_tensor": " (C/m²)", "elastic_tensor": " (GPa)"}
    for key, unit in units.items():
        series[key] = ([], [], f"{key.replace('_', ' ')} components{unit}")
    for s, p in zip(structures, predictions, strict=True):
        for key in units:
            if key in s.labels and key in p:
                series[key][0].extend(np.ravel(s.labels[key]))
                series[key][1].extend(np.ravel(p[key]))
        if "energy" in s.labels and "energy" in p:
            series["energy"][0].append(s.labels["energy"] / len(s))
            series["energy"][1].append(p["energy"] / len(s))
        if "forces" in s.labels and "forces" in p:
            series["forces"][0].extend(np.ravel(s.labels["forces"]))
            series["forces"][1].extend(np.ravel(p["forces"]))
        if "stress" in s.labels and "stress" in p:
            series["stress"][0].extend(np.ravel(s.labels["stress"]) * EV_PER_ANG3_TO_GPA)
            series["stress"][1].extend(np.ravel(p["stress"]) * EV_PER_ANG3_TO_GPA)
    written = []
    for name, (reference, predicted, label) in series.items():
        if not reference:
            continue
        reference, predicted = np.asarray(reference), np.asarray(predicted)
        mae = float(np.abs(predicted - reference).mean())
        fig, ax = plt.subplots(figsize=(4.5, 4.5), dpi=120)
        ax.scatter(reference, predicted, s=4, alpha=0.5)
        low, high = float(min(reference.min(), predicted.min())), float(max(reference.max(), predicted.max()))
        ax.plot([low, high], [low, high], color="black", linewidth=0.8)
        ax.set_xlabel(f"reference {label}")
        ax.set_ylabel(f"predicted {label}")
        ax.set_title(f"{potential.metadata.name}: MAE {mae:.4g}")
        fig.tight_layout()
        path = directory / f"parity_{name}.png"
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    return written
