"""What the gaps in the mlearn MD series' snapshot numbers say about the published test sets.

Each AIMD and vacancy-AIMD record of an mlearn training file is described as "Snapshot i of N
of <series>". Where N is the length of the series (the vacancy and the Mo runs; the bulk Li,
Si and Ge runs say "of 100000", the length of the MD run, not of the sample), the snapshots
missing from the training file are the ones the published test set can hold. This prints,
per element and series, the snapshots in the file, the series length and the share missing;
a share near the test set's overall ~10 % in every series says the published split took its
share of each series, as ``data.stratify_by: [group, temperature_k]`` does for the validation
split, and that a plain random split (which can take twice a series' share, or none of it) is
the less faithful stand-in for the published test set.

    python scripts/mlearn_series_gaps.py [--element Mo]
"""

from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from atomistic.data.datasets import read_mlearn_json  # noqa: E402

SNAPSHOT = re.compile(r"^Snapshot (\d+) of (\d+) of (.+)$")
ELEMENTS = ("Ge", "Li", "Mo", "Si")


@dataclass(frozen=True)
class Series:
    group: str
    name: str
    length: int  # snapshots in the whole series (N of "Snapshot i of N")
    present: tuple[int, ...]  # the snapshot numbers in the training file

    @property
    def missing(self) -> int:
        return self.length - len(set(self.present))

    @property
    def sampled(self) -> bool:
        """Whether the file samples the whole series (N is its length), so its gaps count."""
        return self.length < 1000


def md_series(structures) -> list[Series]:
    """The MD series of one mlearn file, in the order they first appear."""
    found: dict[tuple[str, str, int], list[int]] = {}
    for s in structures:
        match = SNAPSHOT.match(str(s.info.get("description", "")))
        if match:
            key = (str(s.info.get("group", "-")), match.group(3), int(match.group(2)))
            found.setdefault(key, []).append(int(match.group(1)))
    return [Series(group, name, length, tuple(sorted(present))) for (group, name, length), present in found.items()]


def series_table(element: str, series: list[Series]) -> str:
    lines = [
        f"{element}: MD series (snapshots in the training file / in the series; missing: the share the test set can hold)",
        "| group | series | in file | series length | missing |",
        "|---|---|---|---|---|",
    ]
    for s in series:
        if s.sampled:
            lines.append(f"| {s.group} | {s.name} | {len(s.present)} | {s.length} | {s.missing} ({s.missing / s.length:.0%}) |")
        else:
            lines.append(f"| {s.group} | {s.name} | {len(s.present)} | ({s.length}: the MD run, not the sample) | - |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--element", action="append", choices=ELEMENTS, help="only these elements; all by default")
    args = parser.parse_args(argv)
    for element in args.element or ELEMENTS:
        structures = read_mlearn_json(ROOT / "data" / "mlearn" / element / "training.json")
        print(series_table(element, md_series(structures)) + "\n")


if __name__ == "__main__":
    main()
