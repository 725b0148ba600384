"""Print the training-history note of the `organic-mace` model card (the MACE-class member of the
`organic` committee), built from the recorded lineage table ``docs/runs/organic_lineage.csv`` (one
row per model, in the order they were trained): how the model was trained, the table itself in
Markdown, and what its 600 K figures say.

    python scripts/write_model_card.py checkpoints/organic-mace --bar organic \\
        --note "$(python scripts/organic_card_note.py)"

Columns of the table (figures as the float64 card and ``scripts/support_errors.py`` measured
them; an empty cell means "not listed"):

- ``name``: the run name (``runs/<name>``, ``docs/runs/<name>``).
- ``stage_hours``: summed epoch time (h) where the run is a stage of ``scripts/train_organic.sh``;
  empty for models outside the reproduced chain.
- ``paused``: ``yes`` where ``stage_hours`` leaves out an epoch paused for a test run.
- ``validation_energy`` / ``validation_force``: RMSE on the validation split, meV/molecule and
  meV/Å; ``hot_energy`` / ``hot_force``: the same on the whole 600 K file.
- ``outside_acac_force`` / ``inside_acac_force``: 600 K force RMSE (meV/Å) on the structures
  outside / inside the acac 300 K distance support; ``outside_all_force`` / ``inside_all_force``:
  the same against the acac + ethanol + methanol support.
- ``config`` (optional column; empty: ``scripts/configs/organic_w128_restart.yaml``): the config a
  kept restart was trained with (``scripts/train_organic.sh`` runs it).
- ``remark``: the last column of the note's lineage table; for a restart without ``stage_hours``,
  what it was (it is named as not kept). A kept restart whose remark begins with
  ``not shipped`` is a stage of the chain that was never published as ``organic``: the note names
  the last row before the model without that remark as the one shipped before it.

The last row is the model the note describes: the last warm restart of ``organic_w128``, run by its
``config`` from the row before it in the restart family.
"""

from __future__ import annotations

import argparse
import csv
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINEAGE = ROOT / "docs" / "runs" / "organic_lineage.csv"
RESTART_FAMILY = re.compile(r"organic_w128[a-z]+$")  # warm restarts of organic_w128: b to z, then za, zb, ...
WIDENED_FROM = "organic_w128"
RESTART_CONFIG = "scripts/configs/organic_w128_restart.yaml"  # a restart's config unless its row names another
NOT_SHIPPED = "not shipped"  # how a remark marks a kept stage that was never published
FIGURE_COLUMNS = (
    "validation_energy",
    "validation_force",
    "hot_energy",
    "hot_force",
    "outside_acac_force",
    "inside_acac_force",
    "outside_all_force",
    "inside_all_force",
)
NUMBER_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
    "sixteen seventeen eighteen nineteen twenty twenty-one twenty-two twenty-three twenty-four "
    "twenty-five twenty-six twenty-seven twenty-eight twenty-nine thirty"
).split()


@dataclass(frozen=True)
class LineageRow:
    """One model of the `organic` lineage; figures in meV/molecule (energies) and meV/Å (forces)."""

    name: str
    stage_hours: float | None
    paused: bool
    figures: dict[str, float | None]
    remark: str
    config: str = RESTART_CONFIG

    @property
    def is_restart(self) -> bool:
        return bool(RESTART_FAMILY.match(self.name))

    @property
    def is_stage(self) -> bool:
        return self.stage_hours is not None

    @property
    def was_dropped(self) -> bool:
        """A warm restart that is not a stage of the chain (not kept)."""
        return self.is_restart and not self.is_stage

    @property
    def was_shipped(self) -> bool:
        """Whether the row can have been the published `organic` (its remark does not say otherwise)."""
        return not self.remark.startswith(NOT_SHIPPED)


def _number(text: str, column: str, name: str) -> float | None:
    if not text.strip():
        return None
    try:
        return float(text)
    except ValueError:
        raise SystemExit(f"{LINEAGE.name}: row {name}: column {column} is {text!r}, not a number") from None


def read_lineage(path: Path = LINEAGE) -> list[LineageRow]:
    """The rows of the lineage table, in training order."""
    with path.open(newline="", encoding="utf-8") as handle:
        reader = csv.DictReader(handle)
        missing = {"name", "stage_hours", "paused", "remark", *FIGURE_COLUMNS} - set(reader.fieldnames or ())
        if missing:
            raise SystemExit(f"{path}: missing columns {', '.join(sorted(missing))}")
        rows = []
        for record in reader:
            name = record["name"].strip()
            if record["paused"].strip() not in ("", "yes"):
                raise SystemExit(f"{path.name}: row {name}: column paused is {record['paused']!r}, not 'yes' or empty")
            rows.append(
                LineageRow(
                    name=name,
                    stage_hours=_number(record["stage_hours"], "stage_hours", name),
                    paused=record["paused"].strip() == "yes",
                    figures={column: _number(record[column], column, name) for column in FIGURE_COLUMNS},
                    remark=record["remark"].strip(),
                    config=(record.get("config") or "").strip() or RESTART_CONFIG,
                )
            )
    for row in rows:
        if not (ROOT / row.config).is_file():
            raise SystemExit(f"{path.name}: row {row.name}: column config names {row.config}, which is not a file")
    if not rows or not rows[-1].is_restart or not rows[-1].is_stage:
        raise SystemExit(f"{path}: the last row must be the newest kept restart of {WIDENED_FROM}")
    return rows


def code(name: str) -> str:
    return f"`{name}`"


def join_words(items: list[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def kept_restarts(rows: list[LineageRow]) -> list[LineageRow]:
    """The warm restarts of ``organic_w128`` that are stages of the chain, in training order."""
    return [row for row in rows if row.is_restart and row.is_stage]


def restart_ranges(rows: list[LineageRow]) -> tuple[list[LineageRow], str, list[LineageRow]]:
    """The kept restarts, their runs of consecutive names as text (``a`` to ``c`` and ``e``), and
    the restarts that were not kept."""
    family = [row for row in rows if row.is_restart]
    runs: list[list[LineageRow]] = [[]]
    for row in family:
        if row.is_stage:
            runs[-1].append(row)
        elif runs[-1]:
            runs.append([])
    spans = [code(run[0].name) if len(run) == 1 else f"{code(run[0].name)} to {code(run[-1].name)}" for run in runs if run]
    return kept_restarts(rows), join_words(spans), [row for row in rows if row.was_dropped]


def figure(value: float | None) -> str:
    """A recorded figure to one decimal where it was recorded so, else to three; a dash for none."""
    if value is None:
        return "–"
    return f"{value:.1f}" if round(value, 1) == value else f"{value:.3f}"


def pair(row: LineageRow, first: str, second: str) -> str:
    """Two figures of a row as ``a / b``, or a dash where the row lacks them."""
    a, b = row.figures[first], row.figures[second]
    return "–" if a is None and b is None else f"{figure(a)} / {figure(b)}"


LINEAGE_HEADER = (
    "| model | epoch time (h) | validation E / F | 600 K file E / F | 600 K F outside / inside the acac support "
    "| 600 K F outside / inside the acac + ethanol + methanol support | remark |\n|---|---|---|---|---|---|---|"
)


def lineage_table(rows: list[LineageRow], shipped_before: LineageRow | None) -> str:
    """Every row of the lineage as a Markdown table, the model itself (the last row) in bold."""
    lines = [LINEAGE_HEADER]
    for row in rows:
        remarks = [row.remark] if row.remark else []
        if row is shipped_before:
            remarks.append("shipped as `organic` before this one")
        if row is rows[-1]:
            remarks.append("this model")
        if row.was_dropped:
            remarks.append("not kept")
        name = f"**{code(row.name)}**" if row is rows[-1] else code(row.name)
        hours = "–" if row.stage_hours is None else f"{row.stage_hours:.1f}"
        lines.append(
            f"| {name} | {hours} | {pair(row, 'validation_energy', 'validation_force')} | {pair(row, 'hot_energy', 'hot_force')} "
            f"| {pair(row, 'outside_acac_force', 'inside_acac_force')} | {pair(row, 'outside_all_force', 'inside_all_force')} "
            f"| {'; '.join(remarks)} |"
        )
    return "\n".join(lines)


def organic_note(rows: list[LineageRow]) -> str:
    """The card note for the last row of ``rows``: how it was trained, a table of every model of
    its lineage, and what the 600 K figures say."""
    kept, spans, dropped = restart_ranges(rows)
    # the run this one started from: the restart before it, or for the first one the widened model
    parents = [row for row in rows if row.name == WIDENED_FROM] + kept[:-1]
    if not parents:
        raise SystemExit(f"{LINEAGE.name}: no row for {WIDENED_FROM}, the model the first restart starts from")
    model, previous = rows[-1], parents[-1]
    shipped_before = next((row for row in reversed(parents) if row.was_shipped), None)
    count = NUMBER_WORDS[len(kept)] if len(kept) < len(NUMBER_WORDS) else str(len(kept))
    if not dropped:
        not_kept = ""
    elif len(dropped) == 1:
        not_kept = f" ({code(dropped[0].name)}, {dropped[0].remark}, was not kept)"
    else:
        not_kept = " (not kept: " + "; ".join(f"{code(row.name)}, {row.remark}" for row in dropped) + ")"
    stages = [row for row in rows if row.is_stage]
    paused = [code(row.name) for row in stages if row.paused]
    paused_text = (f"; for {join_words(paused)} less the time their metrics logs count inside an epoch paused for a test run"
                   if paused else "")
    other_configs = [row for row in kept if row.config != RESTART_CONFIG]
    by_config: dict[str, list[str]] = {}
    for row in other_configs:
        by_config.setdefault(row.config, []).append(code(row.name))
    other_text = "".join(f"; {join_words(names)} with {code(config)}, as {'its remark says' if len(names) == 1 else 'their remarks say'}"
                         for config, names in by_config.items())
    for column, what in (("outside_acac_force", "support figures (scripts/support_errors.py)"),
                         ("outside_all_force", "acac + ethanol support figures")):
        if model.figures[column] is None:
            raise SystemExit(f"{LINEAGE.name}: {model.name} has no {what}")

    return (
        f"{code(model.name)}: the last of {count} warm restarts of {code(WIDENED_FROM)}, {spans}{not_kept}, "
        f"each `{RESTART_CONFIG}` run from the previous one's best weights in its own run "
        f"directory (for this one `--run-dir runs/{model.name} --init runs/{previous.name}/best`): 110 epochs, "
        f"cosine from 0.0005, energy weight 100 after epoch 80, on the same data{other_text} (config and metrics of each in "
        "`docs/runs/<name>`, the weights of `organic_w128b` in `docs/runs/organic_w128b/best`). `organic_w128` is "
        "`organic_v14` (64 channels, l ≤ 2 hidden features; kept as `organic-compact`) widened to 128 channels "
        "(`model.widen_channels`: the widened model starts with `organic_v14`'s function, the weights that read the "
        "new channels at zero) and trained on the same data (`scripts/configs/organic_w128.yaml` with "
        "`--init runs/organic_v14/best`: 90 epochs, cosine from 0.001, energy weight 100 after epoch 65; 957 328 "
        "parameters; weights in `docs/runs/organic_w128/best`). `organic_v14` is the last of seven stages "
        "(`scripts/train_organic.sh`): `organic_v6` (`scripts/configs/organic_v6.yaml`: 64 channels, 300-epoch cosine "
        "from 0.01, energy weight 10 and then 100 after epoch 225) and six warm restarts, `organic_v8` and "
        "`organic_v9` (250 epochs each, cosine from 0.004 and 0.002), `organic_v11` (180 epochs from 0.001), whose "
        "training set adds the forces of 300 seeded ethanol geometries (`data/botnet/ethanol/train.xyz`, rMD17 "
        "geometries at 500 K, PBE/def2-SVP without D3; weight 0.5, energy weight 0, kept out of validation) to the 450 "
        "acac ones, `organic_v12` (600 ethanol geometries, 120 epochs from 0.0005), `organic_v13` (all 1000 ethanol "
        "geometries plus the forces of 300 methanol geometries from 500 K ab initio MD at the same level, "
        "`data/botnet/ethanol/train_methanol.xyz`, with the same weights; 110 epochs from 0.0005) and `organic_v14` "
        "(the same data and cycle); weights of each in `docs/runs/`. "
        f"Training time in all: {sum(row.stage_hours for row in stages):.1f} h over {len(stages)} stages (sums of epoch "
        f"times{paused_text}) on a 2-core CPU.\n\n"
        "Every model of the lineage on the same validation split unless its remark says otherwise, in training order (RMSE; E in meV/molecule, F in "
        "meV/Å; the 600 K file is acac `train_600K.xyz`, never trained on; a dash: not measured):\n\n"
        f"{lineage_table(rows, shipped_before)}\n\n"
        "The ethanol forces are what moved the 600 K error: 91 of the 500 600 K structures hold a bond shorter than "
        "any in the acac 300 K file (most often O–H below 0.936 Å), and the force RMSE on them fell from 114.8 meV/Å "
        "(`organic_v9`) to 64.6 (`organic_v11`; `organic_v10`, the same restart on acac alone, reached 113.5). With the ethanol file 27 of the 500 stay outside the training "
        "support, and the methanol file adds none (O–O below 2.380 Å: 16, C–O below 1.167 Å: 6, C–C below 1.287 Å: 4, "
        f"C–H below 0.968 Å: 1); on them this model's force RMSE is {figure(model.figures['outside_all_force'])} meV/Å "
        f"against {figure(model.figures['inside_all_force'])} on the rest (`scripts/support_errors.py`). "
        "Expect larger force errors wherever a simulation compresses bonds beyond the training data, breaks the "
        "ring's hydrogen bond (an O···O longer than any at 300 K, 2.870 Å; 32 of the 500 600 K structures) or moves "
        "the enol proton towards the middle (`scripts/acac_frames.py`), and note that "
        "the published MACE and NequIP figures come from acac data alone. Its CPU inference takes 2.6 times "
        "`organic-compact`'s for a batch of 64 molecules and 1.3 times for one (`scripts/bench_checkpoints.py`)."
    )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lineage", type=Path, default=LINEAGE, help="the lineage table (default: %(default)s)")
    parser.add_argument("--stages", action="store_true", help="print the kept restarts and their configs, one per line, instead")
    args = parser.parse_args(argv)
    rows = read_lineage(args.lineage)
    if args.stages:
        print("\n".join(f"{row.name} {row.config}" for row in kept_restarts(rows)))
        return
    print(organic_note(rows))


if __name__ == "__main__":
    main()
