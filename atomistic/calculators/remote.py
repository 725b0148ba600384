"""ASE calculator that calls an atomistic server (``POST /v1/predict``)."""

from __future__ import annotations

import time

import numpy as np
from ase.calculators.calculator import Calculator, PropertyNotImplementedError, all_changes
from ase.stress import full_3x3_to_voigt_6_stress


class RemoteError(RuntimeError):
    """The server refused or failed a request; the message carries its error and detail."""


class RemoteCalculator(Calculator):
    """Energy, free energy, per-atom energies, forces and stress from a remote server.

    Args:
        url: server base URL, e.g. ``http://127.0.0.1:8000``.
        model: model name on the server.
        api_key: bearer token when the server requires one.
        timeout: seconds per HTTP request.
        retries: attempts on 503 (queue full / shutting down), with exponential backoff
            that honours ``Retry-After``.
    """

    implemented_properties = ["energy", "free_energy", "energies", "forces", "stress"]

    def __init__(self, url: str, model: str = "default", api_key: str | None = None, timeout: float = 120.0, retries: int = 5, **kwargs):
        super().__init__(**kwargs)
        import httpx

        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self.client = httpx.Client(base_url=url.rstrip("/"), headers=headers, timeout=timeout)
        self.model = model
        self.retries = retries

    def _post(self, payload: dict) -> dict:
        delay = 0.5
        for attempt in range(self.retries + 1):
            response = self.client.post("/v1/predict", json=payload)
            if response.status_code == 503 and attempt < self.retries:
                wait = float(response.headers.get("retry-after", delay))
                time.sleep(min(max(wait, delay), 30.0))
                delay *= 2
                continue
            if response.status_code != 200:
                try:
                    body = response.json()
                except ValueError:
                    body = {"error": response.text}
                raise RemoteError(f"server answered {response.status_code}: {body.get('error')}: {body.get('detail')}")
            return response.json()
        raise RemoteError("server stayed unavailable (503)")

    def calculate(self, atoms=None, properties=("energy",), system_changes=all_changes):
        super().calculate(atoms, properties, system_changes)
        has_volume = bool(self.atoms.pbc.any() and self.atoms.cell.volume > 1e-12)
        if "stress" in properties and not has_volume:
            raise PropertyNotImplementedError("stress needs a periodic structure with a non-zero cell volume")
        structure = {
            "numbers": self.atoms.numbers.tolist(),
            "positions": self.atoms.positions.tolist(),
            "cell": self.atoms.cell.array.tolist(),
            "pbc": self.atoms.pbc.tolist(),
        }
        wanted = ["energy", "energies", "forces"] + (["stress"] if has_volume else [])
        result = self._post({"model": self.model, "properties": wanted, "structures": [structure]})["results"][0]
        self.results = {
            "energy": result["energy"],
            "free_energy": result["energy"],
            "energies": np.asarray(result["energies"]),
            "forces": np.asarray(result["forces"]),
        }
        if has_volume and result.get("stress") is not None:
            self.results["stress"] = full_3x3_to_voigt_6_stress(np.asarray(result["stress"]))
