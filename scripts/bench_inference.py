"""Inference speed of atomistic against a peer, measured in the same run.

    python scripts/bench_inference.py mace [--dtypes float32,float64] [--backend reference] [--json]
    python scripts/bench_inference.py sevennet [--device cpu|cuda] [--dtype float32] [--repeats 5]

Case ``mace``: an atomistic MACE-class potential against mace-torch's ``ScaleShiftMACE`` at
equal hyperparameters (channels, hidden L, spherical-harmonic L, layers, correlation order,
cutoff, Bessel basis, envelope, radial MLP), both freshly initialised, on the same
structures: bulk Si 216 and 512 atoms, fcc Cu 256 atoms and a batch of eight 27-atom 3BPA
molecules.  One energy + forces evaluation of the whole case is timed (median of
``--repeats`` after a warm-up; graph construction excluded on both sides), and the peak
memory of those calls is reported (CPU: growth of the process's peak RSS; CUDA: allocator
peak).  mace-torch pins an old e3nn, so it runs in its own virtualenv (``.venv-mace``, built
on first use with the same torch version as this one) through ``scripts/mace_peer.py``;
each side runs in a fresh process per dtype.  Prints atoms/s for both and the ratio
ours/mace (> 1: atomistic is faster); ``--json`` prints one JSON object whose ``cases``
list holds, per structure and dtype, ``ours_atoms_per_s``, ``mace_atoms_per_s`` and ``ratio``.

Case ``sevennet``: atomistic's ``sevennet-0`` against ``sevenn``'s own ``SevenNetCalculator``
(same weights) on the same structures, energy + forces + stress, one structure per call as
an ASE calculator user would make them. On CUDA the peer also runs with its cuEquivariance
and FlashTP options when those are installed. Prints one line per structure with both
median wall times and the ratio peer/ours (> 1: atomistic is faster).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def _structures():
    from ase.build import bulk

    si = bulk("Si", "diamond", 5.43, cubic=True)
    nacl = bulk("NaCl", "rocksalt", 5.64, cubic=True)
    cases = {"Si 64": si.repeat(2), "Si 216": si.repeat(3), "NaCl 64": nacl.repeat(2), "NaCl 216": nacl.repeat(3)}
    for k, atoms in enumerate(cases.values()):
        atoms.rattle(0.03, seed=k)
    return cases


def _time(fn, repeats: int, device: str) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def bench_sevennet(device: str, dtype: str, repeats: int) -> None:
    from sevenn.calculator import SevenNetCalculator

    from atomistic import AtomisticCalculator

    ours = AtomisticCalculator(model="sevennet-0", device=device, dtype=dtype)
    peers = {"sevenn": SevenNetCalculator("7net-0", device=device)}
    if device == "cuda":
        for label, kwargs in (("sevenn+cueq", {"enable_cueq": True}), ("sevenn+flash", {"enable_flash": True})):
            try:
                peers[label] = SevenNetCalculator("7net-0", device=device, **kwargs)
            except Exception as err:  # accelerator not installed: say so, measure the rest
                print(f"# {label} unavailable: {err}")
    print(f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, threads {torch.get_num_threads()}, device {device}, atomistic dtype {dtype}")
    print(f"{'structure':<10} {'ours (s)':>10} " + " ".join(f"{p + ' (s)':>16} {'ratio':>6}" for p in peers))

    def run(calc, atoms):
        calc.reset()  # ASE calculators cache results for unchanged atoms: force a new evaluation
        a = atoms.copy()
        a.calc = calc
        a.get_potential_energy()
        a.get_forces()
        a.get_stress()

    for name, atoms in _structures().items():
        t_ours = _time(lambda atoms=atoms: run(ours, atoms), repeats, device)
        row = f"{name:<10} {t_ours:>10.4f} "
        for calc in peers.values():
            t_peer = _time(lambda calc=calc, atoms=atoms: run(calc, atoms), repeats, device)
            row += f"{t_peer:>16.4f} {t_peer / t_ours:>6.2f} "
        print(row, flush=True)


MACE_PEER_VERSION = "mace-torch==0.3.16"


def mace_structures() -> dict[str, list]:
    """The benchmark cases: name -> list of ASE Atoms (one batch)."""
    import ase.io
    from ase.build import bulk

    si = bulk("Si", "diamond", 5.43, cubic=True)
    cu = bulk("Cu", "fcc", 3.61, cubic=True)
    cases = {"Si 216": [si.repeat(3)], "Si 512": [si.repeat(4)], "Cu 256": [cu.repeat(4)]}
    for k, atoms_list in enumerate(cases.values()):
        atoms_list[0].rattle(0.03, seed=k)
    molecules = ase.io.read(ROOT / "data/botnet/3BPA/train_300K.xyz", ":8")
    for m in molecules:
        m.cell, m.pbc = None, False
    cases["3BPA 27 x 8"] = molecules
    return cases


def mace_hyperparameters(args) -> dict:
    return {
        "species": [1, 6, 7, 8, 14, 29],
        "cutoff": args.cutoff,
        "num_bessel": 8,
        "envelope_exponent": 5,
        "max_ell": args.max_ell,
        "channels": args.channels,
        "hidden_lmax": args.hidden_lmax,
        "num_layers": args.layers,
        "correlation": args.correlation,
        "radial_hidden": [64, 64, 64],
        "avg_num_neighbors": 20.0,
    }


def ours_worker(spec: dict) -> None:
    """Time atomistic on every case of ``spec`` (run in a fresh process)."""
    from atomistic.data import to_structures
    from atomistic.data.graph import build_graph
    from atomistic.models.builders import build_potential, mace_architecture
    from atomistic.models.encoders.mace import MACEConfig

    sys.path.insert(0, str(ROOT / "scripts"))
    import ase.io
    from _bench_common import time_step

    dtype = getattr(torch, spec["dtype"])
    torch.manual_seed(0)
    config = MACEConfig(**{k: (tuple(v) if isinstance(v, list) else v) for k, v in spec["hyperparameters"].items()})
    potential = build_potential(mace_architecture(config), dtype=dtype, backend=spec["backend"]).to(spec["device"])
    cases: dict[str, list] = {}
    for atoms in ase.io.read(spec["structures"], ":"):
        cases.setdefault(atoms.info["case"], []).append(atoms)
    for case, atoms_list in cases.items():
        structures = list(to_structures(atoms_list))
        graph = build_graph(structures, potential.cutoff, potential.species, dtype=dtype, device=spec["device"])
        seconds, peak = time_step(lambda graph=graph: potential(graph, compute_forces=True), spec["device"], spec["repeats"])
        n_atoms = sum(len(a) for a in atoms_list)
        print(json.dumps({"case": case, "atoms": n_atoms, "seconds": seconds, "peak_mb": peak}), flush=True)


def peer_environment() -> dict[str, str]:
    """The environment of every process of the mace-torch virtualenv: ours without PYTHONPATH,
    which may put the project's own packages (e3nn of another version than mace-torch pins;
    scripts/gpu_env.sh puts wheels there) ahead of the virtualenv's, and without warnings."""
    return {**{k: v for k, v in os.environ.items() if k != "PYTHONPATH"}, "PYTHONWARNINGS": "ignore"}


def ensure_mace_venv(path: Path, system_site_packages: bool) -> Path:
    """The mace-torch virtualenv (built on first use): same torch version as ours."""
    python = path / "bin" / "python"
    if python.exists():
        return python
    print(f"# building the mace-torch virtualenv at {path} (once)", file=sys.stderr, flush=True)
    venv_args = [sys.executable, "-m", "venv", str(path)]
    if system_site_packages:
        venv_args.insert(3, "--system-site-packages")
    subprocess.run(venv_args, check=True)
    pip = [str(python), "-m", "pip", "install", "-q"]
    env = peer_environment()
    has_torch = subprocess.run([str(python), "-c", "import torch"], capture_output=True, env=env).returncode == 0
    if not has_torch:
        subprocess.run([*pip, f"torch=={torch.__version__.split('+')[0]}"], check=True, env=env)
    subprocess.run([*pip, MACE_PEER_VERSION], check=True, env=env)
    return python


def _run_worker(command: list[str], env: dict[str, str] | None = None) -> dict[str, dict]:
    """Run a benchmark worker (``env``: default ours, without warnings); its JSON lines by case."""
    env = {**os.environ, "PYTHONWARNINGS": "ignore"} if env is None else env
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(command)} failed:\n{done.stderr[-3000:]}")
    rows = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return {row["case"]: row for row in rows}


def bench_mace(args) -> None:
    import ase.io

    hyperparameters = mace_hyperparameters(args)
    cases = mace_structures()
    peer_python = Path(args.mace_python) if args.mace_python else ensure_mace_venv(ROOT / ".venv-mace", args.peer_system_site_packages)
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        frames = []
        for case, atoms_list in cases.items():
            for atoms in atoms_list:
                atoms = atoms.copy()
                atoms.info = {"case": case}
                frames.append(atoms)
        structures_path = Path(tmp) / "structures.extxyz"
        ase.io.write(structures_path, frames)
        for dtype in args.dtypes.split(","):
            spec = {
                "hyperparameters": hyperparameters,
                "structures": str(structures_path),
                "dtype": dtype,
                "device": args.device,
                "repeats": args.repeats,
                "backend": args.backend,
                "cueq": args.peer_cueq,
            }
            spec_path = Path(tmp) / f"spec-{dtype}.json"
            spec_path.write_text(json.dumps(spec))
            ours = _run_worker([sys.executable, __file__, "_ours", str(spec_path)])
            peer = _run_worker([str(peer_python), str(ROOT / "scripts" / "mace_peer.py"), str(spec_path)], peer_environment())
            for case in cases:
                o, p = ours[case], peer[case]
                results.append(
                    {
                        "structure": case,
                        "atoms": o["atoms"],
                        "dtype": dtype,
                        "ours_atoms_per_s": o["atoms"] / o["seconds"],
                        "mace_atoms_per_s": p["atoms"] / p["seconds"],
                        "ratio": p["seconds"] / o["seconds"],
                        "ours_peak_mb": o["peak_mb"],
                        "mace_peak_mb": p["peak_mb"],
                    }
                )
                if not args.json:
                    _print_mace_row(results[-1], first=len(results) == 1, args=args, hyperparameters=hyperparameters)
    if args.json:
        print(json.dumps({"machine": _machine(args.device), "backend": args.backend, "peer_cueq": args.peer_cueq, "hyperparameters": hyperparameters, "cases": results}, indent=2))


def _machine(device: str) -> str:
    name = torch.cuda.get_device_name() if device.startswith("cuda") else (platform.processor() or platform.machine())
    return f"{name}, {os.cpu_count()} CPU cores, torch {torch.__version__}"


def _print_mace_row(row: dict, first: bool, args, hyperparameters: dict) -> None:
    if first:
        print(f"# {_machine(args.device)}; atomistic backend {args.backend}; peer mace-torch{' + cuEquivariance' if args.peer_cueq else ''}")
        print(f"# hyperparameters: {json.dumps(hyperparameters)}")
        print(f"{'structure':<13} {'dtype':<8} {'ours atoms/s':>13} {'mace atoms/s':>13} {'ratio':>6} {'ours MiB':>9} {'mace MiB':>9}")

    def mb(x):
        return f"{x:9.0f}" if x is not None else f"{'n/a':>9}"

    print(
        f"{row['structure']:<13} {row['dtype']:<8} {row['ours_atoms_per_s']:>13.0f} {row['mace_atoms_per_s']:>13.0f} "
        f"{row['ratio']:>6.2f} {mb(row['ours_peak_mb'])} {mb(row['mace_peak_mb'])}",
        flush=True,
    )


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "_ours":
        ours_worker(json.loads(Path(sys.argv[2]).read_text()))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("case", choices=["mace", "sevennet"])
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32", help="sevennet case: atomistic dtype")
    parser.add_argument("--dtypes", default="float32,float64", help="mace case: comma-separated dtypes")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--backend", default="auto", help="atomistic kernel backend (mace case)")
    parser.add_argument("--channels", type=int, default=64)
    parser.add_argument("--max-ell", type=int, default=3)
    parser.add_argument("--hidden-lmax", type=int, default=1)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--correlation", type=int, default=3)
    parser.add_argument("--cutoff", type=float, default=5.0)
    parser.add_argument("--mace-python", help="python of an existing mace-torch environment")
    parser.add_argument("--peer-cueq", action="store_true", help="run mace-torch with cuEquivariance (CUDA)")
    parser.add_argument("--peer-system-site-packages", action="store_true", help="build .venv-mace on the system torch (GPU machines)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.case == "sevennet":
        bench_sevennet(args.device, args.dtype, args.repeats)
    else:
        bench_mace(args)


if __name__ == "__main__":
    main()
