"""Training-step throughput of vaswani's Transformer next to torch.nn.Transformer, in one run.

Both models have the same shape (the `small` preset unless told otherwise), the same embeddings and
output layer, the same batch (a quarter of its sentences half padding, source and target), optimiser
and loss (label smoothing 0.1). Three rows per precision:
- torch.nn.Transformer: its stacks, then the logits of every position and the loss;
- vaswani.Transformer, logits + loss: the same output layer and loss, so only the stacks differ;
- vaswani.Transformer, its training step: what `vaswani train` runs, the output layer and its loss
  fused (`vaswani.loss.linear_cross_entropy`: no logits held, padding rows skipped), and its
  optimizer (`vaswani.train.step.adam`: the same Adam, fused into one kernel). The first two rows
  step with PyTorch's default Adam, as a user of torch.nn.Transformer writes it.
The arms take turns one step at a time, so that a machine whose speed drifts slows them alike.
They run in one process, so the allocator setting that `vaswani train` makes on a CPU (glibc keeps
the memory a step frees, `--allocator kept`) holds for every arm.
Reports target tokens per second of a full step (forward, backward, Adam) in fp32 and in the
precision `--precision auto` picks on this machine (bf16 autocast only where the hardware computes
it), the speed-up over torch.nn.Transformer (its medians' ratio, and the quartiles of the ratio
between the steps of one round of turns: how far the host's drift moves it), and the share of the
machine's measured matmul peak that each step reaches (matmul FLOPs of the step counted by
PyTorch's FlopCounterMode).

    python benchmarks/train_throughput.py [--preset small] [--batch 64] [--length 32] [--steps 20]
        [--allocator kept|default]
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from dataclasses import dataclass, field

import torch
from torch import nn

from vaswani import ModelConfig, Transformer
from vaswani.device import DTYPES, autocast, benchmark_setting, grad_scaler, keep_freed_memory
from vaswani.loss import LossHead, mean_loss
from vaswani.model import causal_mask
from vaswani.train import label_smoothed_cross_entropy
from vaswani.train.step import adam


class TorchReference(nn.Module):
    """torch.nn.Transformer between vaswani's embeddings and output layer.

    nn.Transformer always ends each stack with a LayerNorm; vaswani has them only with pre-norm.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        donor = Transformer(cfg)
        self.src_embed, self.tgt_embed = donor.encoder.embed, donor.decoder.embed
        self.output_projection = donor.output_projection
        self.core = nn.Transformer(
            d_model=cfg.d_model,
            nhead=cfg.n_heads,
            num_encoder_layers=cfg.n_encoder_layers,
            num_decoder_layers=cfg.n_decoder_layers,
            dim_feedforward=cfg.d_ff,
            dropout=cfg.dropout,
            activation=cfg.activation,
            layer_norm_eps=cfg.layer_norm_eps,
            norm_first=cfg.norm == "pre",  # the same residual layout as the preset
            batch_first=True,
        )

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        pad = src == self.cfg.pad_id
        out = self.core(
            self.src_embed(src),
            self.tgt_embed(tgt),
            tgt_mask=~causal_mask(tgt.size(1), device=tgt.device)[0, 0],
            src_key_padding_mask=pad,
            memory_key_padding_mask=pad,
        )
        return self.output_projection(out)


SMOOTHING = 0.1


def step_loss(model: nn.Module, src: torch.Tensor, tgt: torch.Tensor, fused: bool) -> torch.Tensor:
    """The mean loss of a batch: through the logits, or through vaswani's fused training head."""
    pad_id = model.cfg.pad_id
    if fused:
        head = LossHead(model.output_projection, tgt[:, 1:], pad_id, SMOOTHING)
        return mean_loss(*model(src, tgt[:, :-1], head=head))
    logits = model(src, tgt[:, :-1])
    return mean_loss(*label_smoothed_cross_entropy(logits, tgt[:, 1:], pad_id, SMOOTHING))


@dataclass
class Arm:
    """One row of the table: a model, its optimizer, its loss scaler (fp16: its scale carries
    from step to step) and its loss."""

    name: str
    model: nn.Module
    optimizer: torch.optim.Optimizer
    scaler: torch.amp.GradScaler
    fused: bool
    times: list[float] = field(default_factory=list)


def train_step(arm: Arm, src: torch.Tensor, tgt: torch.Tensor, precision: str) -> float:
    """Seconds of one training step of `arm` (forward, loss, backward, Adam)."""
    scaler = arm.scaler
    start = time.perf_counter()
    with autocast(src.device, precision):
        loss = step_loss(arm.model, src, tgt, arm.fused)
    arm.optimizer.zero_grad(set_to_none=True)
    scaler.scale(loss).backward()
    scaler.step(arm.optimizer)
    scaler.update()
    if src.device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def time_interleaved(
    arms: list[Arm], src: torch.Tensor, tgt: torch.Tensor, precision: str, steps: int
) -> None:
    """Median seconds per step of each arm (into `arm.times`), the arms taking turns one step at
    a time after two warm-up steps each: a machine whose speed drifts (a shared host) slows
    every arm alike instead of whichever ran during the slow minute."""
    for arm in arms:
        arm.model.train()
        for _ in range(2):
            train_step(arm, src, tgt, precision)
    for i in range(steps):
        turn = arms[i % len(arms) :] + arms[: i % len(arms)]
        for arm in turn:
            arm.times.append(train_step(arm, src, tgt, precision))


def round_speedups(reference: list[float], times: list[float]) -> tuple[float, float]:
    """First and third quartiles of the speed-up over the reference within each round of turns:
    steps that ran next to each other are compared, so the spread shows how much the host's
    drift moves the ratio of medians."""
    ratios = [r / t for r, t in zip(reference, times, strict=True)]
    if len(ratios) < 2:
        return ratios[0], ratios[0]
    low, _, high = statistics.quantiles(ratios, n=4)
    return low, high


def matmul_peak(dtype: torch.dtype, device: torch.device, n: int = 2048) -> float:
    """Best FLOP/s of an n x n matmul: the machine's practical peak for this dtype."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    best = float("inf")
    for _ in range(12):
        start = time.perf_counter()
        a @ b
        if device.type == "cuda":
            torch.cuda.synchronize()
        best = min(best, time.perf_counter() - start)
    return 2 * n**3 / best


def step_flops(
    model: nn.Module, src: torch.Tensor, tgt: torch.Tensor, precision: str, fused: bool
) -> int:
    """Matmul and attention FLOPs of one forward + backward pass."""
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as counter:
        with autocast(src.device, precision):
            loss = step_loss(model, src, tgt, fused)
        loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def main() -> None:
    warnings.filterwarnings("ignore", message="enable_nested_tensor is True")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--length", type=int, default=32, help="source and target length")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per measurement")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--allocator",
        choices=("kept", "default"),
        default="kept",
        help="kept: glibc keeps freed memory, as `vaswani train` sets it on a CPU "
        "(vaswani.device.keep_freed_memory; process-wide, so every arm has it); default: glibc's own",
    )
    parser.add_argument(
        "--precisions", nargs="+", help="default: fp32 and what --precision auto picks here"
    )
    args = parser.parse_args()

    torch.manual_seed(0)
    cfg = ModelConfig.from_preset(args.preset)
    device = torch.device(args.device)
    kept = device.type == "cpu" and args.allocator == "kept" and keep_freed_memory()
    src = torch.randint(3, cfg.vocab_size, (args.batch, args.length), device=device)
    tgt = torch.randint(3, cfg.vocab_size, (args.batch, args.length + 1), device=device)
    src[: args.batch // 4, args.length // 2 :] = cfg.pad_id  # some padding, as in real batches
    tgt[: args.batch // 4, args.length // 2 + 1 :] = cfg.pad_id
    tokens = args.batch * args.length
    setting, precisions = benchmark_setting(args.device)
    precisions = args.precisions or precisions
    peaks = {p: matmul_peak(DTYPES[p], device) for p in precisions}

    print(setting)
    print(
        f"preset={args.preset} batch={args.batch}x{args.length} "
        f"allocator={'kept (every arm)' if kept else 'default'}"
    )
    print(
        "measured matmul peak: "
        + ", ".join(f"{p} {peak / 1e9:.0f} GFLOP/s" for p, peak in peaks.items())
    )
    print(
        f"{'precision':<10} {'model':<42} {'ms/step':>9} {'tgt tok/s':>10} {'speed-up':>9} "
        f"{'quartiles':>11} {'of peak':>8}"
    )
    for precision in precisions:
        arms = []
        for name, build, fused in (
            ("torch.nn.Transformer", TorchReference, False),
            ("vaswani.Transformer, logits + loss", Transformer, False),
            ("vaswani.Transformer, its training step", Transformer, True),
        ):
            torch.manual_seed(0)
            model = build(cfg).to(device)
            if fused:  # what `vaswani train` steps with
                optimizer = adam(model.parameters(), device)
            else:  # PyTorch's default Adam, as a user of torch.nn.Transformer writes it
                optimizer = torch.optim.Adam(model.parameters(), betas=(0.9, 0.98), eps=1e-9)
            for group in optimizer.param_groups:
                group["lr"] = 1e-4
            arms.append(Arm(name, model, optimizer, grad_scaler(device, precision), fused))
        flops = [step_flops(arm.model, src, tgt, precision, arm.fused) for arm in arms]
        time_interleaved(arms, src, tgt, precision, args.steps)
        baseline = statistics.median(arms[0].times)
        for arm, arm_flops in zip(arms, flops, strict=True):
            seconds = statistics.median(arm.times)
            low, high = round_speedups(arms[0].times, arm.times)
            print(
                f"{precision:<10} {arm.name:<42} {seconds * 1e3:>9.1f} {tokens / seconds:>10.0f} "
                f"{baseline / seconds:>8.2f}x {low:>5.2f}-{high:<5.2f} "
                f"{arm_flops / seconds / peaks[precision]:>7.1%}"
            )


if __name__ == "__main__":
    main()
