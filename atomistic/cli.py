"""Command line: ``atomistic predict | score | serve | models | info | eval | train | import``.

    atomistic predict                      # the bundled example structures, default model
    atomistic predict relaxed.cif --json   # one JSON object per structure
    atomistic score big.extxyz -o scores.jsonl [--engine ray]   # streaming, resumable
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from atomistic import keys
from atomistic.voigt import tensor_file_values, with_voigt_forms

app = typer.Typer(help="atomistic: equivariant machine-learning force fields.", no_args_is_help=True, add_completion=False)
console = Console(width=max(Console().width, 120))
EXAMPLES = Path(__file__).resolve().parent / "examples" / "structures.extxyz"


def _fail(err: Exception) -> typer.Exit:
    """Bad input or model: one clear line on stderr, exit status 2, no traceback."""
    typer.echo(f"error: {err}", err=True)
    return typer.Exit(code=2)


@app.command()
def predict(
    files: Annotated[list[Path] | None, typer.Argument(help="Structure files (extxyz, xyz, CIF, POSCAR, mlearn JSON). Default: bundled examples.")] = None,
    model: Annotated[str, typer.Option(help="Model name or checkpoint directory.")] = "default",
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    dtype: Annotated[str, typer.Option(help="float64 or float32.")] = "float64",
    backend: Annotated[str, typer.Option(help="Kernel backend: auto, reference, cueq, triton or e3nn.")] = "auto",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object per structure.")] = False,
    properties: Annotated[str | None, typer.Option(help="Comma-separated: energy, forces, stress, energies, dielectric_tensor, piezoelectric_tensor, elastic_tensor. Default: energy, forces, stress (or the tensors of a tensor model).")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Write results: .extxyz (structures with results) or .jsonl.")] = None,
) -> None:
    """Energies (eV), forces (eV/Å), stress (eV/Å³) and crystal tensors for every structure in FILES."""
    from atomistic.checkpoint import load_potential
    from atomistic.data.convert import read_structures

    paths = files or [EXAMPLES]
    try:
        potential = load_potential(model, device=device, dtype=dtype, backend=backend)
        structures, names = [], []
        for path in paths:
            for k, s in enumerate(read_structures(path)):
                structures.append(s)
                names.append(f"{path.name}[{k}]")
        wanted = None if properties is None else tuple(p.strip() for p in properties.split(",") if p.strip())
        results = potential.predict(structures, properties=wanted)
    except (ValueError, FileNotFoundError) as err:
        raise _fail(err) from None
    records = []
    for name, s, r in zip(names, structures, results, strict=True):
        record = {"structure": name, "formula": s.to_ase().get_chemical_formula(), "n_atoms": len(s)}
        record.update({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in with_voigt_forms(r).items()})
        records.append(record)
    if output is not None:
        _write_results(output, structures, results, records)
        typer.echo(f"wrote {len(records)} results to {output}")
        return
    if as_json:
        for record in records:
            typer.echo(json.dumps(record))
        return
    if not potential.has_energy:
        _tensor_table(potential, names, structures, results, dtype)
        return
    table = Table(title=f"model '{potential.metadata.name}' ({potential.metadata.backend} kernels, {dtype})")
    for column in ("structure", "formula", "atoms", "energy (eV)", "eV/atom", "max |F| (eV/Å)", "pressure (GPa)"):
        table.add_column(column, justify="right" if column != "structure" else "left")
    from atomistic.units import EV_PER_ANG3_TO_GPA

    for name, s, r in zip(names, structures, results, strict=True):
        fmax = float(np.linalg.norm(r["forces"], axis=1).max()) if "forces" in r else float("nan")
        pressure = f"{-np.trace(r['stress']) / 3 * EV_PER_ANG3_TO_GPA:.3f}" if "stress" in r else "-"
        table.add_row(name, s.to_ase().get_chemical_formula(), str(len(s)), f"{r['energy']:.6f}", f"{r['energy'] / len(s):.6f}", f"{fmax:.4f}", pressure)
    console.print(table)


def _tensor_table(potential, names, structures, results, dtype) -> None:
    """Per structure: VRH moduli and C11/C12/C44 (GPa), the dielectric diagonal, the largest
    piezoelectric coefficient (C/m²); ``--json`` gives the full tensors."""
    from atomistic.training.metrics import vrh_moduli

    table = Table(title=f"model '{potential.metadata.name}' ({potential.metadata.backend} kernels, {dtype})")
    columns = ["structure", "formula", "atoms"]
    if keys.ELASTIC_TENSOR in potential.properties:
        columns += ["K_VRH (GPa)", "G_VRH (GPa)", "C11", "C12", "C44 (GPa)"]
    if keys.DIELECTRIC_TENSOR in potential.properties:
        columns += ["ε_xx", "ε_yy", "ε_zz"]
    if keys.PIEZOELECTRIC_TENSOR in potential.properties:
        columns += ["max |e_ijk| (C/m²)"]
    for column in columns:
        table.add_column(column, justify="left" if column == "structure" else "right")
    for name, s, r in zip(names, structures, results, strict=True):
        row = [name, s.to_ase().get_chemical_formula(), str(len(s))]
        if keys.ELASTIC_TENSOR in r:
            c = r[keys.ELASTIC_TENSOR]
            row += [f"{x:.1f}" for x in (*vrh_moduli(c), c[0, 0, 0, 0], c[0, 0, 1, 1], c[1, 2, 1, 2])]
        if keys.DIELECTRIC_TENSOR in r:
            row += [f"{x:.3f}" for x in np.diag(r[keys.DIELECTRIC_TENSOR])]
        if keys.PIEZOELECTRIC_TENSOR in r:
            row += [f"{np.abs(r[keys.PIEZOELECTRIC_TENSOR]).max():.4f}"]
        table.add_row(*row)
    console.print(table)


def _write_results(output: Path, structures, results, records) -> None:
    """``.jsonl``: one JSON record per structure; ``.extxyz``: structures with their results."""
    if output.suffix == ".jsonl":
        output.write_text("".join(json.dumps(r) + "\n" for r in records))
        return
    if output.suffix not in (".extxyz", ".xyz"):
        raise _fail(ValueError(f"--output: use a .extxyz or .jsonl file, got '{output.name}'"))
    from ase.calculators.singlepoint import SinglePointCalculator
    from ase.io import write
    from ase.stress import full_3x3_to_voigt_6_stress

    frames = []
    for s, r in zip(structures, results, strict=True):
        atoms = s.to_ase()
        values = {k: v for k, v in r.items() if k in ("energy", "forces", "energies")}
        if "stress" in r:
            values["stress"] = full_3x3_to_voigt_6_stress(r["stress"])
        atoms.calc = SinglePointCalculator(atoms, **values)
        atoms.info.update(tensor_file_values(r))  # crystal tensors as the extxyz reader reads them back
        frames.append(atoms)
    write(output, frames, format="extxyz")


@app.command()
def score(
    input_path: Annotated[Path, typer.Argument(metavar="INPUT", help="Structures: .extxyz/.xyz or .jsonl (one structure object per line); read one at a time.")],
    output: Annotated[Path, typer.Option("-o", "--output", help="Results, JSON lines: {index, energy, forces, ...} or {index, error} per input, in order.")],
    model: Annotated[str, typer.Option(help="Model name or checkpoint directory.")] = "default",
    properties: Annotated[str, typer.Option(help="Comma-separated: energy, forces, stress, energies.")] = "energy,forces",
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    dtype: Annotated[str, typer.Option(help="float64 or float32.")] = "float64",
    backend: Annotated[str, typer.Option(help="Kernel backend: auto, reference, cpu, cueq, triton or e3nn.")] = "auto",
    chunk_size: Annotated[int, typer.Option(help="Structures per chunk (the unit of progress and resume).")] = 64,
    engine: Annotated[str, typer.Option(help="local (this process) or ray (one model replica per Ray worker).")] = "local",
    workers: Annotated[int, typer.Option(help="Ray workers (engine ray).")] = 2,
    ray_address: Annotated[str | None, typer.Option(help="Ray cluster address (engine ray); default: start a local instance.")] = None,
    input_format: Annotated[str | None, typer.Option("--format", help="extxyz or jsonl (default: from the file name).")] = None,
) -> None:
    """Score every structure of INPUT into OUTPUT, streaming and resumable: re-running the same
    command after an interruption continues from the last completed chunk."""
    from rich.progress import BarColumn, MofNCompleteColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.progress import Progress as Bar

    from atomistic.scoring import Progress, count_inputs, run_scoring
    from atomistic.scoring import input_format as format_of

    wanted = tuple(p.strip() for p in properties.split(",") if p.strip())
    try:
        fmt = format_of(input_path, input_format)
        if not input_path.exists():
            raise FileNotFoundError(f"no such input file: '{input_path}'")
        unknown = set(wanted) - set(keys.PROPERTIES)
        if unknown:
            raise ValueError(f"--properties: unknown {sorted(unknown)}; choose from {list(keys.PROPERTIES)}")
        if engine not in ("local", "ray"):
            raise ValueError(f"--engine: 'local' or 'ray', got '{engine}'")
        total = count_inputs(input_path, fmt)
    except (ValueError, FileNotFoundError) as err:
        raise _fail(err) from None
    state_path = output.with_name(output.name + ".progress.json")
    identity = {"input": str(input_path.resolve()), "input_bytes": input_path.stat().st_size, "model": model, "properties": list(wanted)}
    progress = Progress()
    if state_path.exists():
        saved = json.loads(state_path.read_text())
        if saved.get("identity") != identity:
            raise _fail(ValueError(f"{state_path} belongs to another run (input, model or properties differ); remove it to start over"))
        progress = Progress(**saved["progress"])
    elif output.exists():
        raise _fail(ValueError(f"{output} exists without {state_path.name}; remove it or choose another --output"))

    def commit(p: Progress) -> None:
        tmp = state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"identity": identity, "progress": dataclasses.asdict(p)}))
        tmp.replace(state_path)  # atomic: the results file is fsync'd before this
        bar.update(task, completed=p.done)

    try:
        if engine == "ray":
            from atomistic.score_engines import ray_map

            map_chunks = ray_map(model, device, dtype, backend, wanted, workers, ray_address)
            potential = None
        else:
            from atomistic.checkpoint import load_potential

            potential = load_potential(model, device=device, dtype=dtype, backend=backend)
            map_chunks = None
    except (ValueError, FileNotFoundError) as err:
        raise _fail(err) from None
    from atomistic.runtime import retain_freed_memory

    retain_freed_memory()  # chunk after chunk of the same size: reuse the buffers
    columns = ("[progress.description]{task.description}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), TimeRemainingColumn())
    with Bar(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task(f"scoring ({engine})", total=total, completed=progress.done)
        final = run_scoring(
            potential, input_path, output, format=fmt, properties=wanted, progress=progress, commit=commit,
            chunk_size=chunk_size, map_chunks=map_chunks,
        )
    typer.echo(f"scored {final.done} of {total} structures ({final.failed} rejected) into {output}")


@app.command()
def serve(
    models: Annotated[list[str] | None, typer.Option("--model", help="Model(s) to serve (repeatable). Default: default.")] = None,
    host: Annotated[str | None, typer.Option(help="Interface (default 127.0.0.1; ATOMISTIC_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default 8000; ATOMISTIC_PORT).")] = None,
    device: Annotated[str | None, typer.Option(help="cpu or cuda.")] = None,
    dtype: Annotated[str | None, typer.Option(help="float64 or float32.")] = None,
    backend: Annotated[str | None, typer.Option(help="Kernel backend: auto, reference, cueq, triton or e3nn (ATOMISTIC_BACKEND).")] = None,
) -> None:
    """Serve models over HTTP (REST API, micro-batching). Other settings: ATOMISTIC_* variables."""
    try:
        import uvicorn

        from server.config import Settings
        from server.main import create_app
    except ImportError as err:
        raise _fail(ValueError(f"the server needs the 'server' extra: pip install 'atomistic[server]' ({err})")) from None
    overrides = {k: v for k, v in {"models": models, "host": host, "port": port, "device": device, "dtype": dtype, "backend": backend}.items() if v}
    settings = Settings(**overrides)
    uvicorn.run(create_app(settings), host=settings.host, port=settings.port, log_level="info", timeout_graceful_shutdown=30)


@app.command()
def models() -> None:
    """List the models in the checkpoints directory."""
    from atomistic.checkpoint import MANIFEST, aliases, checkpoints_dir, encoder_name, read_manifest

    table = Table(title=f"models in {checkpoints_dir()}")
    for column in ("name", "aliases", "species", "cutoff (Å)", "encoder"):
        table.add_column(column)
    alias_names: dict[str, list[str]] = {}
    for alias, target in aliases().items():
        alias_names.setdefault(target, []).append(alias)
    from ase.data import chemical_symbols

    for directory in sorted(checkpoints_dir().glob("*")):
        if (directory / MANIFEST).exists():
            m = read_manifest(directory)
            symbols = [chemical_symbols[z] for z in sorted(m["species"])]
            species = " ".join(symbols) if len(symbols) <= 12 else f"{len(symbols)} elements ({symbols[0]}–{symbols[-1]})"
            table.add_row(
                directory.name,
                ", ".join(alias_names.get(directory.name, [])),
                species,
                str(m["cutoff"]),
                encoder_name(m["architecture"]),
            )
    console.print(table)


@app.command()
def train(
    config: Annotated[Path, typer.Argument(help="Training config (YAML or TOML); see atomistic.training.config.")],
    resume: Annotated[bool, typer.Option(help="Continue the run in the config's run_dir.")] = False,
    init: Annotated[str | None, typer.Option(help="Start from this checkpoint (fine-tuning).")] = None,
    stop_after_epochs: Annotated[int | None, typer.Option(help="Stop (resumably) after this many epochs in this call.")] = None,
    max_minutes: Annotated[
        float | None, typer.Option(help="Stop (resumably) after the epoch that passes this wall time in this call.")
    ] = None,
    run_dir: Annotated[
        Path | None,
        typer.Option(help="Replaces the config's run_dir (and its output, with <run-dir>/best), so one config serves several runs."),
    ] = None,
    output: Annotated[Path | None, typer.Option(help="Replaces the config's output (the best model's directory).")] = None,
) -> None:
    """Train a model; checkpoints, metrics.jsonl and parity plots are written as it goes."""
    from rich.progress import BarColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.progress import Progress as Bar

    from atomistic.training.config import load_config
    from atomistic.training.run import train as run_training

    try:
        settings = load_config(config)
        if run_dir is not None:
            settings = dataclasses.replace(settings, run_dir=str(run_dir), output=str(run_dir / "best"))
        if output is not None:
            settings = dataclasses.replace(settings, output=str(output))
        # live display: epochs as a fractional bar with the current step and loss; epoch
        # summaries (validation MAE, ETA) print above it and stay in the scroll-back
        columns = (TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), TextColumn("ETA"), TimeRemainingColumn())
        with Bar(*columns, console=console) as bar:
            task = bar.add_task("starting", total=settings.epochs)

            started = False

            def on_step(epoch: int, step: int, steps: int, loss: float) -> None:
                nonlocal started
                if not started:  # a resumed run starts part-way: no speed sample for the jump
                    bar.reset(task, completed=epoch - 1 + (step - 1) / steps)
                    started = True
                bar.update(
                    task,
                    completed=epoch - 1 + step / steps,
                    description=f"epoch {epoch}/{settings.epochs} step {step}/{steps} loss {loss:.4g}",
                )

            run_training(
                settings,
                resume=resume,
                init=init,
                stop_after_epochs=stop_after_epochs,
                max_hours=None if max_minutes is None else max_minutes / 60,
                # plain lines: no markup (paths may hold brackets) and no wrapping (one event, one line)
                log=lambda line: bar.console.print(line, markup=False, highlight=False, soft_wrap=True),
                on_step=on_step,
            )
    except (ValueError, FileNotFoundError) as err:
        raise _fail(err) from None


@app.command("eval")
def evaluate_command(
    model: Annotated[str, typer.Argument(help="Model name or checkpoint directory.")],
    data: Annotated[list[Path], typer.Argument(help="Labelled files: extxyz or mlearn JSON.")],
    device: Annotated[str, typer.Option(help="cpu or cuda.")] = "cpu",
    dtype: Annotated[str, typer.Option(help="float64 or float32.")] = "float64",
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    energy_key: Annotated[str, typer.Option(help="extxyz info key of the reference energy (eV), e.g. REF_energy.")] = "energy",
    forces_key: Annotated[str, typer.Option(help="extxyz arrays key of the reference forces (eV/Å).")] = "forces",
    stress_key: Annotated[str, typer.Option(help="extxyz info key of the reference stress (eV/Å³).")] = "stress",
) -> None:
    """Energy (meV/atom), force (eV/Å) and stress (GPa) errors per file and overall; for
    crystal-tensor models, Fnorm, EwT 25/10/5 % and (elastic) VRH bulk/shear modulus MAE.
    Labels a file lacks are left out of its figures; a file with none is reported on stderr."""
    from atomistic.checkpoint import load_potential
    from atomistic.data.convert import LabelKeys, missing_labels_message, read_structures
    from atomistic.training.metrics import ErrorAccumulator, evaluate

    label_keys = LabelKeys(energy=energy_key, forces=forces_key, stress=stress_key)
    try:
        potential = load_potential(model, device=device, dtype=dtype)
        overall = ErrorAccumulator()
        per_file = {}
        for path in data:
            structures = read_structures(path, label_keys=label_keys)
            if missing := missing_labels_message(path, structures, label_keys):
                typer.echo(f"warning: {missing} (pass --energy-key / --forces-key / --stress-key)", err=True)
            errors = evaluate(potential, structures)
            per_file[str(path)] = errors.summary()
            overall.extend(errors)
    except (ValueError, FileNotFoundError) as err:
        raise _fail(err) from None
    result = {**overall.summary(), "per_file": per_file}
    if as_json:
        typer.echo(json.dumps(result))
        return
    table = Table(title=f"model '{potential.metadata.name}' ({dtype})")
    standard = {
        "energy_mae_mev_per_atom": ("E MAE (meV/atom)", 2), "energy_rmse_mev_per_atom": ("E RMSE (meV/atom)", 2),
        "force_mae_ev_per_ang": ("F MAE (eV/Å)", 4), "force_rmse_ev_per_ang": ("F RMSE (eV/Å)", 4),
        "stress_mae_gpa": ("S MAE (GPa)", 3),
    }
    # energy columns where the model has an energy head; every tensor metric that was measured
    shown = {k: v for k, v in standard.items() if potential.has_energy}
    shown.update({k: (k, 3) for k in result if k not in standard and k not in ("n_structures", "per_file")})
    table.add_column("file", justify="left", overflow="fold")  # a long path wraps, never cut
    table.add_column("structures", justify="right")
    for title, _ in shown.values():
        table.add_column(title, justify="right")

    def fmt(value, digits):
        return "-" if value is None else f"{value:.{digits}f}"

    for name, m in [*per_file.items(), ("overall", result)]:
        table.add_row(name, str(m["n_structures"]), *(fmt(m.get(k), digits) for k, (_, digits) in shown.items()))
    console.print(table)


import_app = typer.Typer(help="Convert third-party pretrained models into atomistic checkpoints.", no_args_is_help=True)
app.add_typer(import_app, name="import")


@import_app.command("sevennet")
def import_sevennet_command(
    name: Annotated[str, typer.Argument(help="sevennet-0 or sevennet-l3i5 (from the installed sevenn package).")],
    output: Annotated[Path | None, typer.Option("-o", "--output", help="Checkpoint directory (default: checkpoints/NAME).")] = None,
) -> None:
    """Convert a SevenNet model shipped in the `sevenn` wheel into a safetensors checkpoint."""
    from atomistic.checkpoint import checkpoints_dir
    from atomistic.importers.sevennet import SevenNetImportError, import_sevennet

    try:
        path = import_sevennet(name, output or checkpoints_dir() / name)
    except SevenNetImportError as err:
        raise _fail(err) from None
    typer.echo(f"wrote {path}")


@app.command()
def info(model: Annotated[str, typer.Argument(help="Model name or checkpoint directory.")] = "default") -> None:
    """Print a model's manifest (architecture, species, provenance, metrics)."""
    from atomistic.checkpoint import read_manifest, resolve

    try:
        manifest = read_manifest(resolve(model))
    except ValueError as err:
        raise _fail(err) from None
    typer.echo(json.dumps(manifest, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    app()
