"""A resumable training loop: AdamW, cosine schedule with warm-up, EMA of weights,
gradient clipping, best-on-validation checkpoints and a JSONL metrics log."""

from __future__ import annotations

import dataclasses
import json
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from atomistic import keys
from atomistic.data.convert import Structure
from atomistic.data.graph import build_graph
from atomistic.models.builders import build_potential
from atomistic.training.losses import (
    TERM_WEIGHT_NAMES,
    LossWeights,
    dataset_mean_weights,
    weighted_loss,
)
from atomistic.training.metrics import fnorm_key, source_group, tensor_metrics
from atomistic.units import EV_PER_ANG3_TO_GPA


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    epochs: int = 100
    batch_size: int = 4  # structures per step
    learning_rate: float = 5e-3
    weight_decay: float = 5e-7
    warmup_epochs: int = 2
    min_lr_ratio: float = 0.02
    ema_decay: float = 0.99
    grad_clip: float = 10.0
    amsgrad: bool = False  # AdamW's AMSGrad variant
    seed: int = 0
    loss: LossWeights = dataclasses.field(default_factory=LossWeights)
    stage_two_start: int | None = None  # after this many epochs, train on stage_two_loss
    stage_two_loss: LossWeights | None = None
    eval_every: int = 1
    max_hours: float | None = None  # stop (resumably) after this much wall time
    schedule: str = "cosine"  # cosine (with warm-up) | plateau
    plateau_factor: float = 0.5
    plateau_patience: int = 5
    early_stopping_patience: int | None = None  # epochs without a better validation score


METRICS_LOG = "metrics.jsonl"  # one JSON record per epoch in a run directory


def read_metrics_log(run_dir: Path) -> list[dict[str, Any]]:
    """The per-epoch records of ``run_dir/metrics.jsonl``, in order (``epoch``, ``lr``,
    ``train`` losses, ``seconds``, and ``valid`` metrics on the epochs that were validated).
    Raises ``FileNotFoundError`` when the run has no log and ``ValueError`` naming the line of
    one that is not JSON."""
    path = Path(run_dir) / METRICS_LOG
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError as error:
            raise ValueError(f"{path}:{number}: not JSON ({error.msg})") from None
    return records


def latest_epoch_records(records: list[dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Epoch → record of a metrics log, the later line where an epoch was logged twice (a log
    from a run interrupted before ``--resume`` truncated it)."""
    return {int(record["epoch"]): record for record in records}


def training_hours(records: list[dict[str, Any]]) -> float:
    """Hours of training in a metrics log: the summed ``seconds`` of its epochs, each epoch once."""
    return sum(record.get("seconds", 0.0) for record in latest_epoch_records(records).values()) / 3600


def _record_epoch(line: str) -> float:
    """The epoch of a metrics record; infinity for a line that is not a whole record."""
    try:
        return json.loads(line)["epoch"]
    except (ValueError, KeyError, TypeError):
        return math.inf


def _energy_force_stress_metrics(
    energy: torch.Tensor | None, forces: torch.Tensor | None, stress: torch.Tensor | None
) -> dict[str, float]:
    """MAE/RMSE over every component of signed residuals: ``energy`` per atom (eV/atom →
    meV/atom), ``forces`` (eV/Å), ``stress`` (eV/Å³ → GPa); NaN where there are none."""

    def reduce(x: torch.Tensor | None, power: int, scale: float) -> float:
        if x is None or not x.numel():
            return float("nan")
        return float(x.abs().pow(power).mean().pow(1 / power) * scale)

    return {
        "energy_mae_mev_per_atom": reduce(energy, 1, 1000.0),
        "energy_rmse_mev_per_atom": reduce(energy, 2, 1000.0),
        "force_mae_ev_per_ang": reduce(forces, 1, 1.0),
        "force_rmse_ev_per_ang": reduce(forces, 2, 1.0),
        "stress_mae_gpa": reduce(stress, 1, EV_PER_ANG3_TO_GPA),
    }


class Trainer:
    """Trains ``potential`` on labelled structures; state lives in ``run_dir`` so a run can
    be resumed after interruption."""

    def __init__(
        self,
        potential,
        train: Sequence[Structure],
        valid: Sequence[Structure],
        config: TrainingConfig,
        run_dir: str | Path,
    ):
        self.potential = potential
        self.config = config
        self.run_dir = Path(run_dir)
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.dtype = potential.dtype
        # crystal-tensor heads: output key -> the head's data scale (loss unit)
        self.tensor_scales = {
            head.output_key: float(head.scale) for head in potential.heads.values() if getattr(head, "output_key", None) in keys.TENSOR_KEYS
        }
        self.train_graphs = self._pre_batch(train)
        self.valid_graphs = self._pre_batch(valid)
        self.valid_sources = [source_group(s) for s in valid]  # the group of each validation structure
        # the training set's mean loss weight per term: weight_normalisation "dataset"
        self.mean_weights = dataset_mean_weights(self.train_graphs, tuple(self.tensor_scales))
        self.n_train = len(train)
        # "source#frame" of each training structure: names the batch of an epoch's worst step
        self.train_names = [f"{s.info.get('source', '?')}#{s.info.get('frame', i)}" for i, s in enumerate(train)]
        self.worst_step: dict[str, Any] = {}  # the last epoch's highest-loss step, see train_epoch
        self.parameters = [p for p in potential.parameters() if p.requires_grad]
        # foreach: one multi-tensor kernel per update term instead of one per parameter tensor
        # (torch picks it only on CUDA by default; on CPU it also saves per-tensor dispatch)
        self.optimizer = torch.optim.AdamW(
            self.parameters, lr=config.learning_rate, weight_decay=config.weight_decay, amsgrad=config.amsgrad, foreach=True
        )
        self.device = potential.device
        self.ema = build_potential(
            potential.metadata.architecture,
            backend=potential.metadata.backend,
            name=potential.metadata.name,
            dtype=self.dtype,
            device=self.device,
        )
        self.ema.load_state_dict(potential.state_dict())
        for p in self.ema.parameters():
            p.requires_grad_(False)
        # the tensors _update_ema pairs (load_state_dict copies in place, so they stay these)
        self._ema_tensors, self._live_tensors = list(self.ema.parameters()), list(potential.parameters())
        if len(self._ema_tensors) != len(self._live_tensors):
            raise RuntimeError(f"EMA model has {len(self._ema_tensors)} parameter tensors, the trained model {len(self._live_tensors)}")
        self.epoch = 0
        self.step = 0
        self.best_valid = math.inf
        self.epochs_since_best = 0
        self.plateau_scale = 1.0  # plateau schedule: current multiple of the base rate
        self.plateau_bad_epochs = 0
        self.rng = np.random.default_rng(config.seed)

    def _pre_batch(self, structures: Sequence[Structure]) -> list[dict[str, torch.Tensor]]:
        """One graph per structure, built once (neighbour lists are the slow part); the
        structure's loss weight (``info["loss_weight"]``, default 1) and its per-term weights
        (``info["loss_weight_energy"]`` …, default the loss weight) ride along."""
        graphs = []
        for s in structures:
            graph = build_graph([s], self.potential.cutoff, self.potential.species, dtype=self.dtype, with_labels=True)
            weight = float(s.info.get("loss_weight", 1.0))
            graph["loss_weight"] = torch.tensor([weight], dtype=self.dtype)
            for term in TERM_WEIGHT_NAMES:  # every graph carries every term, so batches collate
                term_value = s.info.get(f"loss_weight_{term}")
                term_weight = weight if term_value is None else float(term_value)
                graph[f"loss_weight_{term}"] = torch.tensor([term_weight], dtype=self.dtype)
            for key in self.tensor_scales:  # the same keys in every graph, so batches collate
                if f"ref_{key}" not in graph:
                    graph[f"ref_{key}"] = torch.zeros((1, *keys.TENSOR_SHAPES[key]), dtype=self.dtype)
                    graph[f"has_{key}"] = torch.zeros(1, dtype=torch.bool)
            graphs.append(graph)
        return graphs

    @staticmethod
    def _collate(graphs: Sequence[dict[str, torch.Tensor]], device: torch.device) -> dict[str, torch.Tensor]:
        """One batch graph on ``device`` from per-structure graphs kept on the CPU."""
        out: dict[str, torch.Tensor] = {}
        atom_offset = 0
        pieces: dict[str, list[torch.Tensor]] = {k: [] for k in graphs[0]}
        for s_idx, g in enumerate(graphs):
            for k, v in g.items():
                if k == keys.EDGE_INDEX:
                    v = v + atom_offset
                elif k == keys.SYSTEM_IDX:
                    v = torch.full_like(v, s_idx)
                pieces[k].append(v)
            atom_offset += g[keys.POSITIONS].shape[0]
        for k, v in pieces.items():
            out[k] = torch.cat(v, dim=1 if k == keys.EDGE_INDEX else 0).to(device, non_blocking=True)
        return out

    def learning_rate(self, epoch_fraction: float) -> float:
        c = self.config
        if c.schedule == "plateau":
            warm = min(1.0, 0.1 + 0.9 * epoch_fraction / max(c.warmup_epochs, 1e-9)) if c.warmup_epochs else 1.0
            return c.learning_rate * warm * self.plateau_scale
        if epoch_fraction < c.warmup_epochs:
            return c.learning_rate * (0.1 + 0.9 * epoch_fraction / max(c.warmup_epochs, 1e-9))
        progress = (epoch_fraction - c.warmup_epochs) / max(c.epochs - c.warmup_epochs, 1e-9)
        cosine = 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
        return c.learning_rate * (c.min_lr_ratio + (1 - c.min_lr_ratio) * cosine)

    @property
    def in_stage_two(self) -> bool:
        start = self.config.stage_two_start
        return start is not None and self.config.stage_two_loss is not None and self.epoch >= start

    def loss_weights(self) -> LossWeights:
        """The loss of the current epoch: the stage-two weights once that stage has started."""
        return self.config.stage_two_loss if self.in_stage_two else self.config.loss

    def train_epoch(self, on_step=None) -> dict[str, float]:
        """One pass over the training set; ``on_step(epoch, step, steps, loss)`` after each
        optimisation step (``epoch`` counts from 1, ``loss`` is the step's total). Returns the
        epoch's mean loss terms; ``self.worst_step`` holds its highest-loss step (``step``,
        ``loss``, the ``structures`` of the batch as ``source#frame``), which locates loss spikes."""
        self.potential.train()
        loss_weights = self.loss_weights()
        order = self.rng.permutation(len(self.train_graphs))
        steps = math.ceil(len(order) / self.config.batch_size)
        totals: dict[str, float] = {}
        worst = {"step": 0, "loss": -math.inf, "structures": []}
        for k in range(steps):
            idx = order[k * self.config.batch_size : (k + 1) * self.config.batch_size]
            batch = self._collate([self.train_graphs[i] for i in idx], self.device)
            lr = self.learning_rate(self.epoch + k / steps)
            for group in self.optimizer.param_groups:
                group["lr"] = lr
            outputs = self.potential(batch, compute_forces=True, compute_stress=True, training=True)
            terms = weighted_loss(outputs, batch, loss_weights, self.tensor_scales, self.mean_weights)
            self.optimizer.zero_grad(set_to_none=True)
            terms["total"].backward()
            torch.nn.utils.clip_grad_norm_(self.parameters, self.config.grad_clip)
            self.optimizer.step()
            self._update_ema()
            self.step += 1
            for name, value in terms.items():
                totals[name] = totals.get(name, 0.0) + float(value.detach()) / steps
            step_loss = float(terms["total"].detach())
            if step_loss > worst["loss"]:
                worst = {"step": k + 1, "loss": step_loss, "structures": [self.train_names[i] for i in idx]}
            if on_step is not None:
                on_step(self.epoch + 1, k + 1, steps, step_loss)
        self.worst_step = worst
        self.epoch += 1
        return totals

    @torch.no_grad()
    def _update_ema(self) -> None:
        decay = min(self.config.ema_decay, (1 + self.step) / (10 + self.step))
        torch._foreach_lerp_(self._ema_tensors, self._live_tensors, 1 - decay)  # ema += (1 - decay) (p - ema)

    def evaluate(self, model=None, graphs=None, sources: Sequence[str] | None = None) -> dict[str, Any]:
        """Validation metrics: energy/force MAE and RMSE (meV/atom, eV/Å), stress MAE (GPa),
        and for each crystal-tensor head the metrics of :func:`~atomistic.training.metrics.tensor_metrics`.
        ``sources`` names the group of each graph (default: the validation structures'
        :func:`~atomistic.training.metrics.source_group`); where there is more than one group,
        ``by_source`` holds the energy/force/stress metrics of each (``{"Ge": {...}, ...}``)."""
        model = model if model is not None else self.ema
        if graphs is None:
            graphs, sources = self.valid_graphs, self.valid_sources
        model.eval()
        structure_idx = torch.arange(len(graphs))
        # (residuals, index in graphs of each residual's structure): energies per structure [n],
        # forces per atom [n_atoms, 3], stresses per structure [n, 3, 3]
        e_err, f_err, s_err = [], [], []
        tensor_pairs: dict[str, list[tuple[torch.Tensor, torch.Tensor]]] = {k: [] for k in self.tensor_scales}
        for k in range(0, len(graphs), 8):
            batch = self._collate(graphs[k : k + 8], self.device)
            out = model(batch, compute_forces=True, compute_stress=True)
            for key, pairs in tensor_pairs.items():
                has_t = batch[f"has_{key}"]
                pairs.append((out[key][has_t].detach(), batch[f"ref_{key}"][has_t]))
            if not model.has_energy:
                continue
            in_batch = structure_idx[k : k + 8]
            n = batch[keys.N_ATOMS].to(out[keys.ENERGY].dtype)
            has = batch["has_energy"]
            e_err.append((((out[keys.ENERGY] - batch["ref_energy"]) / n)[has].cpu(), in_batch[has.cpu()]))
            atom_has = batch["has_forces"][batch[keys.SYSTEM_IDX]]
            f_err.append(((out[keys.FORCES] - batch["ref_forces"])[atom_has].cpu(), in_batch[batch[keys.SYSTEM_IDX][atom_has].cpu()]))
            has_s = batch["has_stress"] & torch.isfinite(out[keys.STRESS]).all(dim=(1, 2))
            s_err.append(((out[keys.STRESS] - batch["ref_stress"])[has_s].cpu(), in_batch[has_s.cpu()]))
        metrics: dict[str, Any] = {}
        if model.has_energy:
            errors = [(torch.cat([x for x, _ in pieces]), torch.cat([i for _, i in pieces])) if pieces else None
                      for pieces in (e_err, f_err, s_err)]
            metrics = _energy_force_stress_metrics(*(None if x is None else x[0] for x in errors))
            groups = sorted(set(sources)) if sources is not None else []
            if len(groups) > 1:
                group_of = np.asarray(sources)
                metrics["by_source"] = {}
                for group in groups:
                    members = torch.from_numpy(np.flatnonzero(group_of == group))
                    selected = [None if x is None else x[0][torch.isin(x[1], members)] for x in errors]
                    metrics["by_source"][group] = _energy_force_stress_metrics(*selected) | {"n_structures": len(members)}
        for key, pairs in tensor_pairs.items():
            predicted = torch.cat([p for p, _ in pairs]).cpu().numpy()
            reference = torch.cat([r for _, r in pairs]).cpu().numpy()
            metrics.update(tensor_metrics(key, predicted, reference))
            if len(reference):  # Fnorm over the mean reference norm: the selection score of a tensor head
                reference_norm = np.sqrt((reference**2).reshape(len(reference), -1).sum(1)).mean()
                metrics[f"{key}_relative_error"] = float(metrics[fnorm_key(key)] / reference_norm)
        metrics["n_structures"] = len(graphs)
        return metrics

    def validation_score(self, valid: dict[str, float]) -> float:
        """Lower is better: energy MAE / 5 meV/atom + force MAE / 0.05 eV/Å (energy models),
        plus 10 × each tensor head's relative Frobenius error."""
        score = 0.0
        if self.potential.has_energy:
            score += valid["energy_mae_mev_per_atom"] / 5.0 + valid["force_mae_ev_per_ang"] / 0.05
        for key in self.tensor_scales:
            score += 10.0 * valid.get(f"{key}_relative_error", float("nan"))
        return score

    # ---- persistence ---------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {
            "model": self.potential.state_dict(),
            "ema": self.ema.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "epoch": self.epoch,
            "step": self.step,
            "best_valid": self.best_valid,
            "epochs_since_best": self.epochs_since_best,
            "plateau_scale": self.plateau_scale,
            "plateau_bad_epochs": self.plateau_bad_epochs,
            "rng": self.rng.bit_generator.state,
            "backend": self.potential.metadata.backend,
        }

    def save_state(self) -> None:
        # training state (optimizer moments, RNG) is internal to a run directory; it is
        # written with torch.save and read back only by the run that wrote it.
        tmp = self.run_dir / "state.pt.tmp"
        torch.save(self.state_dict(), tmp)
        tmp.replace(self.run_dir / "state.pt")

    def load_state(self) -> bool:
        path = self.run_dir / "state.pt"
        if not path.exists():
            return False
        state = torch.load(path, weights_only=True, map_location=self.device)
        self.potential.load_state_dict(state["model"])
        self.ema.load_state_dict(state["ema"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.epoch, self.step, self.best_valid = state["epoch"], state["step"], state["best_valid"]
        self.epochs_since_best = state["epochs_since_best"]
        self.plateau_scale = state["plateau_scale"]
        self.plateau_bad_epochs = state["plateau_bad_epochs"]
        self.rng.bit_generator.state = state["rng"]
        return True

    def drop_unsaved_records(self) -> None:
        """Drop metrics records of epochs after the saved state (a run killed between writing
        an epoch's record and its state redoes that epoch and writes the record again)."""
        path = self.run_dir / METRICS_LOG
        if not path.exists():
            return
        lines = path.read_text().splitlines()
        kept = [line for line in lines if _record_epoch(line) <= self.epoch]  # a torn last line goes too
        if len(kept) != len(lines):
            path.write_text("".join(line + "\n" for line in kept))

    def _after_validation(self, score: float) -> bool:
        """Update best score, plateau schedule and early stopping; True if improved."""
        improved = score < self.best_valid
        if improved:
            self.best_valid = score
            self.epochs_since_best = 0
            self.plateau_bad_epochs = 0
        else:
            self.epochs_since_best += 1
            self.plateau_bad_epochs += 1
            if self.config.schedule == "plateau" and self.plateau_bad_epochs >= self.config.plateau_patience:
                self.plateau_scale *= self.config.plateau_factor
                self.plateau_bad_epochs = 0
        return improved

    def fit(self, on_best=None, log=print, stop_after_epochs: int | None = None, on_step=None) -> dict[str, Any]:
        """Train until ``config.epochs`` (or early stopping, the time budget, or
        ``stop_after_epochs`` more epochs in this call); state is saved after every epoch.
        ``on_step`` is passed to :meth:`train_epoch` (a live progress display)."""
        start = time.time()
        first_epoch = self.epoch
        metrics_path = self.run_dir / METRICS_LOG
        last: dict[str, Any] = {}
        while self.epoch < self.config.epochs:
            t0 = time.time()
            stage = 2 if self.in_stage_two else 1
            train_terms = self.train_epoch(on_step)
            record: dict[str, Any] = {
                "epoch": self.epoch, "stage": stage, "lr": self.learning_rate(self.epoch), "train": train_terms,
                "worst_step": self.worst_step,
            }
            if self.epoch % self.config.eval_every == 0 or self.epoch == self.config.epochs:
                valid = self.evaluate()
                record["valid"] = valid
                score = self.validation_score(valid)
                if self._after_validation(score) and on_best is not None:
                    on_best(self.ema, valid)
                last = valid
            record["seconds"] = time.time() - t0
            with open(metrics_path, "a") as fh:
                fh.write(json.dumps(record) + "\n")
            self.save_state()
            elapsed = time.time() - start
            eta = (self.config.epochs - self.epoch) * record["seconds"]
            log(
                f"epoch {self.epoch}/{self.config.epochs} loss {train_terms['total']:.4g} "
                + (f"val E {last.get('energy_mae_mev_per_atom', float('nan')):.2f} meV/atom "
                   f"F {last.get('force_mae_ev_per_ang', float('nan')):.4f} eV/Å " if last and self.potential.has_energy else "")
                + "".join(f"{name} {last[name]:.3g} " for name in last if name.endswith(("_fnorm_gpa", "_fnorm", "_fnorm_c_per_m2", "_ewt25")))
                + f"({record['seconds']:.0f}s/epoch, ETA {eta / 60:.0f} min)"
            )
            if self.config.max_hours is not None and elapsed > self.config.max_hours * 3600:
                log("time budget reached; resume with the same run directory")
                break
            patience = self.config.early_stopping_patience
            if patience is not None and self.epochs_since_best >= patience:
                log(f"early stopping: no better validation score for {patience} epochs")
                break
            if stop_after_epochs is not None and self.epoch - first_epoch >= stop_after_epochs:
                break
        return last
