"""Pictures of what a Transformer does: attention maps, the positional encoding, training curves,
a classifier's confusion matrix.

Each function builds a matplotlib figure, writes it (PNG or SVG, by the file's suffix) and returns
it, so callers and tests can look at its panels. Figures are made without pyplot, so importing this
module chooses no backend and changes nothing in a notebook or GUI that imports it too.
"""

from __future__ import annotations

import bisect
import io
import math
from pathlib import Path
from typing import Any

import torch
from matplotlib.figure import Figure

from vaswani.config import DecodeConfig
from vaswani.decoding.search import decode
from vaswani.decoding.text import TextModel, split_prefix
from vaswani.errors import VaswaniError
from vaswani.model import sinusoidal_encoding
from vaswani.run import METRICS
from vaswani.safe_io import is_number, read_records, write_atomic


class PlotError(VaswaniError, ValueError):
    """A run or an input that cannot be plotted; the message names it."""


PANEL_INCHES_PER_TOKEN = 0.16  # room for one token label at font size 7
MIN_PANEL_INCHES = 2.2


def subplots(*grid: int, squeeze: bool = True, **figure: Any) -> tuple[Figure, Any]:
    """`pyplot.subplots` without pyplot: a figure that belongs to no backend or window."""
    fig = Figure(**figure)
    return fig, fig.subplots(*grid, squeeze=squeeze)


def save(fig: Figure, path: Path) -> Figure:
    path = Path(path)
    if path.suffix.lower() not in (".png", ".svg"):
        raise ValueError(f"{path}: write .png or .svg")
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    fig.savefig(buffer, format=path.suffix[1:].lower(), dpi=110, bbox_inches="tight")
    write_atomic(path, buffer.getvalue())  # a link at `path` is replaced, never written through
    return fig


def heads_grid(
    maps: list[torch.Tensor],
    queries: list[str],
    keys: list[str],
    title: str,
    numbers: list[int] | None = None,
) -> Figure:
    """One row per layer, one panel per head; query tokens down, key tokens across.

    maps: per layer (H, Lq, Lk) attention weights of one sentence; numbers: which layers (from 0)
    they are, when not all of them.
    """
    numbers = list(range(len(maps))) if numbers is None else numbers
    layers, heads = len(maps), maps[0].size(0)
    width = max(MIN_PANEL_INCHES, PANEL_INCHES_PER_TOKEN * len(keys) + 0.8)
    height = max(MIN_PANEL_INCHES, PANEL_INCHES_PER_TOKEN * len(queries) + 0.8)
    fig, axes = subplots(
        layers, heads, figsize=(width * heads + 1.2, height * layers + 0.6), squeeze=False
    )
    image = None
    for layer, weights in enumerate(maps):
        for head in range(heads):
            ax = axes[layer][head]
            image = ax.imshow(
                weights[head].float().cpu().numpy(), vmin=0.0, vmax=1.0, cmap="viridis"
            )
            ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=7)
            # Query labels on the first column only: they would run into the panel to the left.
            ax.set_yticks(range(len(queries)), queries if head == 0 else [], fontsize=7)
            ax.set_title(f"layer {numbers[layer] + 1}, head {head + 1}", fontsize=9)
            if head == 0:
                ax.set_ylabel("query (attending)", fontsize=8)
            if layer == layers - 1:
                ax.set_xlabel("key (attended to)", fontsize=8)
    fig.suptitle(title)
    fig.colorbar(image, ax=axes, shrink=0.6, label="attention weight")
    return fig


def attention(
    tm: TextModel, text: str, out: Path, prefix: list[int] | None = None
) -> dict[str, Figure]:
    """Translate `text` greedily, then draw encoder self-, decoder self- and cross-attention of
    that translation, one file each: OUT-encoder.png, OUT-decoder.png, OUT-cross.png. `prefix`:
    ids before the text's own (a multilingual model's target-language token)."""
    figures = attention_figures(tm, text, prefix=prefix)
    out = Path(out)
    for kind, fig in figures.items():
        save(fig, out.with_name(f"{out.stem}-{kind}{out.suffix}"))
    return figures


def attention_figures(
    tm: TextModel, text: str, first_and_last: bool = False, prefix: list[int] | None = None
) -> dict[str, Figure]:
    """The encoder, decoder and cross-attention pictures of `text` (after `prefix`) and its greedy
    translation: every layer, or only the first and the last (a sixth of the drawing for a
    6-layer model)."""
    model, src_tokenizer, tgt_tokenizer = tm.model, tm.src_tokenizer, tm.tgt_tokenizer
    cfg = model.cfg
    device = next(model.parameters()).device
    ids = src_tokenizer.encode(text)
    if not ids:
        raise ValueError("the sentence to plot is empty")
    before, start = split_prefix(prefix, tm.forces_target)  # a forced language token: target's
    ids = [*before, *ids]
    if len(ids) + 1 > cfg.max_len:
        raise ValueError(f"the sentence has {len(ids) + 1} tokens, over max_len={cfg.max_len}")
    src = torch.tensor([[*ids, cfg.eos_id]], device=device)
    forced = torch.tensor(start, device=device) if start else None
    with torch.no_grad():
        output = [
            *start,
            *decode(model, src, DecodeConfig(beam_size=1), forced=forced)[0][0].tokens,
        ]
    maps = tm.attention([[*ids, cfg.eos_id]], [[cfg.bos_id, *output]])
    src_labels = [*src_tokenizer.tokens(ids), "</s>"]
    tgt_labels = ["<s>", *tgt_tokenizer.tokens(output)]
    translation = tgt_tokenizer.decode(output)

    def grid(
        per_layer: list[torch.Tensor], queries: list[str], keys: list[str], title: str
    ) -> Figure:
        shown = sorted({0, len(per_layer) - 1}) if first_and_last else range(len(per_layer))
        return heads_grid([per_layer[i][0] for i in shown], queries, keys, title, list(shown))

    return {
        "encoder": grid(maps.encoder, src_labels, src_labels, f"Encoder self-attention: {text!r}"),
        "decoder": grid(
            maps.decoder_self,
            tgt_labels,
            tgt_labels,
            f"Decoder self-attention (masked): {translation!r}",
        ),
        "cross": grid(
            maps.cross,
            tgt_labels,
            src_labels,
            f"Encoder-decoder attention: {text!r} -> {translation!r}",
        ),
    }


def positional_encoding(d_model: int, length: int, out: Path) -> Figure:
    """The sinusoidal positional encoding (§3.5) as a heat map: positions down, dimensions across."""
    table = sinusoidal_encoding(length, d_model).numpy()
    fig, ax = subplots(figsize=(max(6.0, d_model / 40), max(4.0, length / 25)))
    image = ax.imshow(table, aspect="auto", cmap="RdBu", vmin=-1.0, vmax=1.0)
    ax.set_xlabel("dimension (even: sin, odd: cos)")
    ax.set_ylabel("position")
    ax.set_title(f"Sinusoidal positional encoding, d_model={d_model}, {length} positions")
    fig.colorbar(image, ax=ax, label="value")
    return save(fig, out)


def read_metrics(run: Path) -> list[dict]:
    path = Path(run) / METRICS
    if not path.is_file():
        raise PlotError(f"{run}: no metrics.jsonl; give a run directory of `vaswani train`")
    return read_records(path)


# The validation figure a run's third panel shows, by what its evaluations record.
VALIDATION_PANELS = [
    ("valid_bleu", "Validation sacreBLEU (greedy)", "BLEU", 1.0),
    ("valid_accuracy", "Validation accuracy", "accuracy (%)", 100.0),
    ("valid_ppl", "Validation perplexity", "perplexity", 1.0),
]


def training(run: Path, out: Path) -> Figure:
    """Loss, learning rate, a validation figure (BLEU of a translation model, accuracy of a
    classifier, perplexity of a language model) and tokens/s from a run's metrics.jsonl."""
    train, valid = curves(run)
    fig, axes = subplots(2, 2, figsize=(11, 7))
    (loss_ax, lr_ax), (bleu_ax, speed_ax) = axes
    steps = [r["step"] for r in train]
    loss_ax.plot(steps, figures(train, "loss"), label="training (label-smoothed)", lw=0.8)
    if valid:
        loss_ax.plot(
            [r["step"] for r in valid], figures(valid, "valid_loss"), "o-", label="validation"
        )
    loss_ax.set(title="Loss", xlabel="step", ylabel="cross-entropy per token (nats)")
    loss_ax.legend()
    lr_ax.plot(steps, figures(train, "lr"))
    lr_ax.set(title="Learning rate (§5.3)", xlabel="step", ylabel="learning rate")
    key, title, unit, scale = next(
        (panel for panel in VALIDATION_PANELS if valid and panel[0] in valid[0]),
        VALIDATION_PANELS[0],
    )
    if valid:
        bleu_ax.plot([r["step"] for r in valid], [scale * v for v in figures(valid, key)], "o-")
    else:
        bleu_ax.text(0.5, 0.5, "no evaluation yet", ha="center", transform=bleu_ax.transAxes)
    bleu_ax.set(title=title, xlabel="step", ylabel=unit)
    speed_ax.plot(steps, figures(train, "tokens_per_s"), lw=0.8)
    speed_ax.set(
        title="Throughput",
        xlabel="step",
        ylabel="tokens / s (target side; a classifier: its texts)",
    )
    for ax in axes.flat:
        ax.grid(alpha=0.3)
    fig.suptitle(f"Training run {Path(run).name}")
    fig.tight_layout()
    return save(fig, out)


def figures(records: list[dict], key: str) -> list[float]:
    """The value of `key` in each record; NaN where a damaged or older record lacks it."""
    return [float(r[key]) if is_number(r.get(key)) else math.nan for r in records]


def curves(run: Path) -> tuple[list[dict], list[dict]]:
    """A run's training records and validation records, each in step order."""
    records = sorted(read_metrics(run), key=lambda r: r["step"])
    train = [r for r in records if is_number(r.get("loss"))]
    valid = [r for r in records if is_number(r.get("valid_loss"))]
    if not train:
        raise PlotError(f"{run}: metrics.jsonl has no training steps yet")
    return train, valid


def positions(records: list[dict], by: str, train: list[dict]) -> list[float]:
    """Where records lie on the x axis: their update, or their training minute (a validation's
    is that of the last update logged before it), found by bisection, not by a scan per record."""
    if by == "step":
        return [r["step"] for r in records]
    steps, minutes = [r["step"] for r in train], [m / 60 for m in figures(train, "elapsed_seconds")]
    return [minutes[max(bisect.bisect_right(steps, r["step"]) - 1, 0)] for r in records]


def compare(runs: list[Path], out: Path, by: str = "step") -> Figure:
    """Learning curves of several runs in one picture: training loss, validation loss and the
    validation chrF (accuracy, perplexity for other tasks), by update or by training minute."""
    fig, axes = subplots(1, 3, figsize=(15, 4.5))
    for run in runs:
        train, valid = curves(run)
        label = Path(run).name
        at_train, at_valid = positions(train, by, train), positions(valid, by, train)
        axes[0].plot(at_train, figures(train, "loss"), lw=0.8, label=label)
        axes[1].plot(at_valid, figures(valid, "valid_loss"), "o-", label=label)
        key = next(
            (k for k in ("valid_chrf", "valid_accuracy", "valid_ppl") if valid and k in valid[0]),
            "valid_chrf",
        )
        axes[2].plot(at_valid, figures(valid, key), "o-", label=label)
    xlabel = "update" if by == "step" else "training minute"
    axes[0].set(title="Training loss (label-smoothed)", xlabel=xlabel, ylabel="nats per token")
    axes[1].set(title="Validation loss", xlabel=xlabel, ylabel="nats per token")
    axes[2].set(title="Validation chrF (accuracy, perplexity)", xlabel=xlabel)
    for ax in axes:
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    return save(fig, out)


def confusion_matrix(counts: torch.Tensor, labels: list[str], out: Path, title: str) -> Figure:
    """A classifier's confusion matrix: true labels down, predicted across, each cell's count
    written in it, coloured by its share of its row (so rare labels show as clearly as common)."""
    counts = counts.cpu()
    shares = (counts / counts.sum(dim=1, keepdim=True).clamp(min=1)).numpy()
    size = max(3.5, 0.6 * len(labels) + 2.0)
    fig, ax = subplots(figsize=(size + 1.0, size))
    image = ax.imshow(shares, vmin=0.0, vmax=1.0, cmap="Blues")
    for i, row in enumerate(counts.tolist()):
        for j, n in enumerate(row):
            ax.text(
                j,
                i,
                str(n),
                ha="center",
                va="center",
                color="white" if shares[i, j] > 0.5 else "black",
            )
    ax.set_xticks(range(len(labels)), labels, rotation=45, ha="right")
    ax.set_yticks(range(len(labels)), labels)
    ax.set(xlabel="predicted label", ylabel="true label")
    accuracy = counts.trace().item() / max(int(counts.sum()), 1)
    ax.set_title(f"{title}\naccuracy {100 * accuracy:.1f}%", fontsize=10)
    fig.colorbar(image, ax=ax, label="share of the true label's examples")
    return save(fig, out)


def panels(fig: Figure) -> int:
    """Panels of a figure, colour bars not counted."""
    return sum(1 for ax in fig.axes if ax.get_label() != "<colorbar>")
