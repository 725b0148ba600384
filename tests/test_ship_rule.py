"""scripts/ship_rule.py: the candidate is chosen on the held-out forces alone and ships only where
both force figures fall; its figures come from the cards' manifests."""

import importlib.util
import json
import sys

import pytest

from atomistic.checkpoint import save_checkpoint
from tests.conftest import small_mace
from tests.paths import ROOT

spec = importlib.util.spec_from_file_location("ship_rule", ROOT / "scripts" / "ship_rule.py")
ship_rule = importlib.util.module_from_spec(spec)
sys.modules[spec.name] = ship_rule  # its dataclasses look their module up
spec.loader.exec_module(ship_rule)
Figures = ship_rule.Figures

SHIPPED = Figures(0.651, 4.508, 4.896, 24.264)


def test_the_transfer_set_never_picks_the_candidate():
    better_transfer = Figures(0.756, 4.554, 4.767, 21.932)  # lower 600 K error, higher held-out
    better_held_out = Figures(0.70, 4.52, 5.0, 25.0)
    decision = ship_rule.decide(SHIPPED, {"c3": better_transfer, "ml": better_held_out})
    assert decision.chosen == "ml"
    assert not decision.ships and "held-out" in decision.reason


def test_the_organic_l3_candidates_do_not_ship():
    """docs/benchmarks.md, "SevenNet-l3i5 as a committee member": the cards' figures."""
    candidates = {"mace+s7d+l3": Figures(0.756, 4.554, 4.767, 21.932), "mace+l3": Figures(0.656, 4.606, 4.898, 23.300)}
    decision = ship_rule.decide(SHIPPED, candidates)
    assert decision.chosen == "mace+s7d+l3" and not decision.ships


def test_ships_only_where_both_force_figures_fall():
    assert ship_rule.decide(SHIPPED, {"a": Figures(0.6, 4.40, 4.8, 24.0)}).ships
    decision = ship_rule.decide(SHIPPED, {"a": Figures(0.6, 4.40, 4.8, 24.5)})
    assert not decision.ships and "transfer" in decision.reason
    assert not ship_rule.decide(SHIPPED, {"a": Figures(0.6, 4.508, 4.8, 24.0)}).ships  # a tie is no gain
    with pytest.raises(ValueError, match="candidates"):
        ship_rule.decide(SHIPPED, {})


def carded(directory, groups):
    """A real (small) checkpoint whose manifest holds the card figures ``groups``."""
    save_checkpoint(small_mace(), directory)
    manifest = json.loads((directory / "manifest.json").read_text())
    manifest.setdefault("metrics", {})["validation_by_group"] = groups
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return str(directory)


def row(energy, force):
    return {"energy_rmse_mev_per_structure": energy, "force_rmse_mev_per_ang": force}


def test_figures_come_from_the_card_and_an_uncarded_checkpoint_is_named(tmp_path, capsys):
    shipped = carded(tmp_path / "shipped", {ship_rule.HELD_OUT: row(0.651, 4.508), ship_rule.TRANSFER: row(4.896, 24.264)})
    candidate = carded(tmp_path / "candidate", {ship_rule.HELD_OUT: row(0.6, 4.4), ship_rule.TRANSFER: row(4.8, 24.0)})
    decision = ship_rule.main([shipped, candidate, "--json"])
    assert decision.ships and decision.chosen == candidate
    printed = json.loads(capsys.readouterr().out)
    assert printed["candidates"][candidate]["transfer_force"] == 24.0 and printed["ships"]
    bare = carded(tmp_path / "bare", {})
    with pytest.raises(SystemExit, match="bare: not carded"):
        ship_rule.main([shipped, bare])
    partial = carded(tmp_path / "partial", {ship_rule.HELD_OUT: row(0.6, 4.4)})
    with pytest.raises(SystemExit, match="no row 'acac 600 K"):
        ship_rule.main([shipped, partial])


def test_its_rows_are_the_organic_card_rows():
    card_spec = importlib.util.spec_from_file_location("write_model_card", ROOT / "scripts" / "write_model_card.py")
    write_model_card = importlib.util.module_from_spec(card_spec)
    card_spec.loader.exec_module(write_model_card)
    assert ship_rule.TRANSFER == write_model_card.TRANSFER_600K_LABEL
    assert ship_rule.HELD_OUT == write_model_card.source_group(write_model_card.read_labelled(ROOT / "data/botnet/acac/train_300K.xyz")[0])
