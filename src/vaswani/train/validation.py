"""Validation during training: the task's figures on the valid split (under a time budget, decoding
stops at the deadline), the record of each in metrics.jsonl, and best/ kept by the task's figure."""

from __future__ import annotations

import json
from pathlib import Path

import torch
from torch import nn

from vaswani import checkpoint as ckpt
from vaswani.config import TrainConfig
from vaswani.data import PreparedData
from vaswani.run import BEST, append_metrics
from vaswani.tasks import Task, Validation, evaluation_mode, get_task
from vaswani.train.state import TrainState


@torch.no_grad()
def evaluate(
    model: nn.Module,
    data: PreparedData,
    tc: TrainConfig,
    device: torch.device,
    deadline: float | None = None,
) -> dict | None:
    """Validation loss over the whole valid split; then by task: perplexity (lm), accuracy
    (classify), or perplexity and sacreBLEU of greedy translations of the split's first
    `eval_sentences` pairs (translate, a fixed sample; with a `deadline` on `time.perf_counter`,
    the sentences decoded before it)."""
    if len(data.split("valid")) == 0:
        return None
    with evaluation_mode(model):
        how = Validation(tc.batch_tokens, tc.precision, tc.eval_sentences, tc.seed, deadline)
        return get_task(data.task).validate(model, data, how)


def record_evaluation(
    run: Path, model: nn.Module, state: TrainState, result: dict, task: Task
) -> None:
    """Log an evaluation; keep the weights in best/ when its figure (the task's `selection`:
    chrF, loss or accuracy) is the best so far."""
    append_metrics(run, {"step": state.step, **result})
    key, higher_is_better = task.selection
    value, best = result[key], state.best
    if best is not None and (value <= best if higher_is_better else value >= best):
        return
    state.best = value
    info = json.dumps({"step": state.step, **result}, indent=1)
    ckpt.write_checkpoint(
        run,
        BEST,
        {
            ckpt.WEIGHTS: lambda p: ckpt.save_weights(model, p),
            ckpt.STATE: lambda p: p.write_text(info),
        },
    )


def evaluation_line(result: dict) -> str:
    """One line of what an evaluation found, e.g. "valid loss 2.301 ppl 10.0 BLEU 12.34"."""
    parts = [f"valid loss {result['valid_loss']:.3f}"]
    if "valid_ppl" in result:
        parts.append(f"ppl {result['valid_ppl']:.2f}")
    if "valid_bleu" in result:
        parts.append(f"BLEU {result['valid_bleu']:.2f} chrF {result['valid_chrf']:.2f}")
    if "valid_accuracy" in result:
        parts.append(f"accuracy {100 * result['valid_accuracy']:.1f}%")
    if "valid_bleu" not in result and result.get("samples"):
        parts.append(f"sample: {result['samples'][0]!r}")
    return " ".join(parts)
