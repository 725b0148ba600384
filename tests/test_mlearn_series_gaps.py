"""scripts/mlearn_series_gaps.py: the MD series of the mlearn files and their missing snapshots."""

import importlib.util
import sys

import pytest

from atomistic.data.datasets import read_mlearn_json
from tests.paths import DATA, ROOT


@pytest.fixture(scope="module")
def gaps():
    spec = importlib.util.spec_from_file_location("mlearn_series_gaps", ROOT / "scripts" / "mlearn_series_gaps.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclass looks its module up there
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def test_mo_series_and_their_gaps(gaps):
    series = {(s.group, s.name): s for s in gaps.md_series(read_mlearn_json(DATA / "mlearn" / "Mo" / "training.json"))}
    hot = series[("AIMD-NVT", "AIMD NVT simulation at 6000 K")]
    assert (len(hot.present), hot.length, hot.missing, hot.sampled) == (36, 40, 4, True)
    assert series[("Vacancy", "Vacancy AIMD NVT simulation at 6000 K")].missing == 1
    table = gaps.series_table("Mo", list(series.values()))
    assert "| AIMD-NVT | AIMD NVT simulation at 6000 K | 36 | 40 | 4 (10%) |" in table


def test_a_bulk_run_numbered_by_md_step_is_not_counted_as_a_series_with_gaps(gaps):
    series = gaps.md_series(read_mlearn_json(DATA / "mlearn" / "Li" / "training.json"))
    bulk = [s for s in series if s.group == "AIMD-NVT"]
    assert bulk and not any(s.sampled for s in bulk)
    assert "the MD run, not the sample" in gaps.series_table("Li", bulk)
