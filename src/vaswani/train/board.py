"""`train --tensorboard`: the run's figures as TensorBoard events under RUN/tensorboard/.

Every logged step writes train/loss, train/lr, train/grad_norm, train/tokens_per_s (and the loss
scale under fp16); every validation writes each of its figures under valid/ (the moving
average's as valid/ema_*), and, for a translation model, the attention maps of one fixed
validation sentence (encoder, decoder and cross-attention, every head of the first and the last
layer: drawing every layer of a base model took ~30 s a validation on 2 cores). A resumed
run purges what the killed one wrote after the checkpoint it resumes from, so no step appears
twice. TensorBoard is an optional dependency: pip install 'vaswani[tensorboard]'.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from torch import nn

from vaswani.data import PreparedData
from vaswani.decoding.text import TextModel
from vaswani.errors import VaswaniError
from vaswani.safe_io import inner_directory

DIRECTORY = "tensorboard"
TRAINING = ("loss", "lr", "grad_norm", "tokens_per_s", "scale")
VALIDATION = ("valid_", "ema_valid_")  # a validation's figures: the weights' and the average's


class TensorBoardMissing(VaswaniError):
    """tensorboard=True without the tensorboard package."""


def require_tensorboard() -> None:
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        raise TensorBoardMissing(
            "tensorboard=True needs the tensorboard package: pip install 'vaswani[tensorboard]'"
        ) from None


class Board:
    """Writes a run's metrics records (and attention pictures) as TensorBoard events."""

    def __init__(self, run: Path, resumed_at: int | None) -> None:
        require_tensorboard()
        from torch.utils.tensorboard import SummaryWriter

        # After a resume at step T, events a killed run wrote at steps above T are hidden.
        purge = None if resumed_at is None else resumed_at + 1
        directory = inner_directory(run / DIRECTORY, "TensorBoard directory")  # never a link
        self.writer = SummaryWriter(log_dir=str(directory), purge_step=purge)
        self.sentence: str | None = None

    def record(self, record: dict[str, Any]) -> None:
        """A metrics.jsonl record: a training step's figures or a validation's."""
        step = record["step"]
        validation = any(key.startswith(VALIDATION) for key in record)
        for key, value in record.items():
            if isinstance(value, bool) or not isinstance(value, int | float) or key == "step":
                continue
            if validation and key.startswith(VALIDATION):
                tag = "valid/" + key.replace("valid_", "", 1)
            elif not validation and key in TRAINING:
                tag = f"train/{key}"
            else:
                continue
            if math.isfinite(value):
                self.writer.add_scalar(tag, value, step)
        self.writer.flush()

    def attention(self, model: nn.Module, data: PreparedData, step: int) -> None:
        """The attention maps of one validation sentence (the same at every validation: the first
        that fits the model) and of its greedy translation by `model` now."""
        from vaswani.plot import attention_figures

        tokenizers = (data.src_tokenizer, data.tgt_tokenizer)
        if self.sentence is None:
            sources = data.text("valid")[0][:100]
            fits = [s for s in sources if 0 < len(tokenizers[0].encode(s)) < model.cfg.max_len]
            self.sentence = fits[0] if fits else ""
        if not self.sentence:
            return
        figures = attention_figures(
            TextModel(model, *tokenizers), self.sentence, first_and_last=True
        )
        for kind, figure in figures.items():
            self.writer.add_figure(f"attention/{kind}", figure, step)
        self.writer.flush()

    def __enter__(self) -> Board:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.writer.close()
