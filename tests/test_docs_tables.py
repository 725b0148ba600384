"""Every Markdown table in the README and docs/ keeps one column count.

The benchmark and lineage tables are edited by hand row by row; a lost line
break merges two rows into one, which renders as a silently wrong table.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.paths import ROOT

MARKDOWN_FILES = sorted([ROOT / "README.md", *(ROOT / "docs").rglob("*.md")])


def count_cells(row: str) -> int:
    """Number of ``|``-separated pieces in one table row.

    Pipes inside code spans and escaped pipes (``\\|``) do not separate cells.
    """
    pieces = 1
    in_code = False
    index = 0
    while index < len(row):
        char = row[index]
        if char == "\\":
            index += 2
            continue
        if char == "`":
            in_code = not in_code
        elif char == "|" and not in_code:
            pieces += 1
        index += 1
    return pieces


def ragged_rows(text: str) -> list[str]:
    """Rows whose cell count differs from their table's header row."""
    problems = []
    header: tuple[int, int] | None = None
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.startswith("|"):
            header = None
            continue
        cells = count_cells(line.rstrip())
        if header is None:
            header = (number, cells)
        elif cells != header[1]:
            problems.append(
                f"line {number}: {cells - 2} columns, header at line "
                f"{header[0]} has {header[1] - 2}"
            )
    return problems


def test_ragged_row_is_found():
    table = "| a | b |\n|---|---|\n| 1 | 2 || 3 | 4 |\n| `x | y` | \\| |\n"
    assert ragged_rows(table) == ["line 3: 5 columns, header at line 1 has 2"]


@pytest.mark.parametrize("path", MARKDOWN_FILES, ids=lambda path: str(path.relative_to(ROOT)))
def test_tables_keep_their_column_count(path: Path):
    assert ragged_rows(path.read_text(encoding="utf-8")) == []
