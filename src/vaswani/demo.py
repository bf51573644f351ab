"""An end-to-end job that needs no data: learn to reverse digit strings, then decode unseen ones.

It exercises the whole model on a laptop CPU in about a minute: the paper's optimiser and schedule
(§5.3), label smoothing (§5.4), bf16 autocast, and greedy decoding through the KV cache.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

import torch

from vaswani.config import ModelConfig
from vaswani.decode import greedy
from vaswani.model import Transformer
from vaswani.progress import progress_bar
from vaswani.train import label_smoothed_cross_entropy, noam_lr
from vaswani.train.loss import mean_loss

PAD, BOS, EOS = 0, 1, 2
DIGIT0 = 3  # ids 3..12 are the digits 0..9
VOCAB_SIZE = DIGIT0 + 10


def encode_digits(text: str) -> list[int]:
    return [DIGIT0 + int(c) for c in text]


def decode_digits(ids: list[int]) -> str:
    return "".join(str(i - DIGIT0) if DIGIT0 <= i < VOCAB_SIZE else "?" for i in ids)


def pad_batch(rows: list[list[int]]) -> torch.Tensor:
    width = max(len(r) for r in rows)
    return torch.tensor([r + [PAD] * (width - len(r)) for r in rows], dtype=torch.long)


@dataclass
class DemoResult:
    steps: int
    seconds: float
    final_loss: float
    exact_match: float
    examples: list[tuple[str, str, str]]  # source, reference, hypothesis


def run_demo(
    steps: int = 1000,
    batch_size: int = 128,
    min_len: int = 4,
    max_len: int = 12,
    n_test: int = 500,
    precision: str = "bf16",
    seed: int = 0,
    progress: bool = True,
) -> DemoResult:
    """Train a small Transformer to reverse digit strings and measure exact match on unseen ones."""
    rng = random.Random(seed)
    torch.manual_seed(seed)

    def sample() -> str:
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(min_len, max_len)))

    test = sorted({sample() for _ in range(n_test)})
    held_out = set(test)

    cfg = ModelConfig.from_preset(
        "tiny",
        vocab_size=VOCAB_SIZE,
        d_model=64,
        n_heads=4,
        d_ff=256,
        max_len=max_len + 2,
        dropout=0.1,
    )
    model = Transformer(cfg)
    optimizer = torch.optim.Adam(model.parameters(), lr=1.0, betas=(0.9, 0.98), eps=1e-9)
    warmup = max(1, steps // 4)
    use_bf16 = precision == "bf16"
    device_type = "cpu"

    start = time.perf_counter()
    model.train()
    bar = progress_bar(range(1, steps + 1), enabled=progress, desc="training", unit="step")
    loss_value = float("nan")
    for step in bar:
        texts = []
        while len(texts) < batch_size:
            text = sample()
            if text not in held_out:
                texts.append(text)
        src = pad_batch([encode_digits(t) + [EOS] for t in texts])
        tgt = pad_batch([[BOS] + encode_digits(t[::-1]) + [EOS] for t in texts])
        tgt_in, tgt_out = tgt[:, :-1], tgt[:, 1:]
        for group in optimizer.param_groups:
            group["lr"] = noam_lr(step, cfg.d_model, warmup)
        with torch.autocast(device_type, dtype=torch.bfloat16, enabled=use_bf16):
            logits = model(src, tgt_in)
        loss = mean_loss(*label_smoothed_cross_entropy(logits, tgt_out, PAD, smoothing=0.1))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        loss_value = loss.item()
        bar.set_postfix(loss=f"{loss_value:.3f}", lr=f"{optimizer.param_groups[0]['lr']:.2e}")
    seconds = time.perf_counter() - start

    model.eval()
    hypotheses: list[str] = []
    for i in range(0, len(test), 128):
        chunk = test[i : i + 128]
        out = greedy(model, pad_batch([encode_digits(t) + [EOS] for t in chunk]))
        hypotheses.extend(decode_digits(h.tokens) for h in out)
    references = [t[::-1] for t in test]
    correct = sum(h == r for h, r in zip(hypotheses, references, strict=True))
    examples = list(zip(test, references, hypotheses, strict=True))[:5]
    return DemoResult(steps, seconds, loss_value, correct / len(test), examples)
