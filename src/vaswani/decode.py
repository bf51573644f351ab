"""Decoding: plain functions over a model and its explicit KV cache.

Each new token costs one decoder step over one position; the prefix is never re-run.
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor

from vaswani.model import Transformer


@torch.no_grad()
def greedy(model: Transformer, src_ids: Tensor, max_extra: int = 50) -> list[list[int]]:
    """Translate a batch by always taking the most probable next token.

    A sentence stops at the end-of-sentence token or after (its source length + `max_extra`)
    tokens, whichever comes first, and never past the model's position limit, so its output does
    not depend on the other sentences of the batch.

    Shapes: src_ids (B, S) padded with cfg.pad_id -> B lists of token ids, without BOS and EOS.
    """
    cfg = model.cfg
    memory, src_mask = model.encode(src_ids)
    cache = model.init_cache(memory, src_mask)
    batch = src_ids.size(0)
    # Position 0 holds BOS, so at most max_len - 1 tokens can be generated.
    limit = torch.clamp((src_ids != cfg.pad_id).sum(dim=1) + max_extra, max=cfg.max_len - 1)
    token = torch.full((batch, 1), cfg.bos_id, dtype=torch.long, device=src_ids.device)
    finished = torch.zeros(batch, dtype=torch.bool, device=src_ids.device)
    outputs: list[Tensor] = []
    for step in range(int(limit.max())):
        logits, cache = model.decode_step(token, cache)  # (B, 1, V)
        next_token = logits[:, -1].argmax(dim=-1)  # (B,)
        next_token = torch.where(finished, cfg.pad_id, next_token)
        outputs.append(next_token)
        finished |= (next_token == cfg.eos_id) | (step + 1 >= limit)
        if bool(finished.all()):
            break
        token = next_token[:, None]  # (B, 1)
    generated = torch.stack(outputs, dim=1).tolist()  # (B, steps)
    result = []
    for row in generated:
        ids = []
        for tok in row:
            if tok in (cfg.eos_id, cfg.pad_id):
                break
            ids.append(tok)
        result.append(ids)
    return result


class Tokenizer(Protocol):
    """What decoding needs of a tokenizer (`vaswani.data.SubwordTokenizer` is one)."""

    def encode_batch(self, texts: list[str]) -> list[list[int]]: ...

    def decode(self, ids: list[int]) -> str: ...


def translate(
    model: Transformer,
    src_tokenizer: Tokenizer,
    tgt_tokenizer: Tokenizer,
    texts: list[str],
    max_tokens: int = 4096,
    max_extra: int = 50,
) -> list[str]:
    """Greedy translations of `texts`, in order; an empty or blank line gives "" without the model.

    Sentences are sorted by length and batched by a source-token budget, so little is padding.
    """
    cfg = model.cfg
    device = next(model.parameters()).device
    results = [""] * len(texts)
    todo = [i for i, text in enumerate(texts) if text.strip()]
    encoded = dict(zip(todo, src_tokenizer.encode_batch([texts[i] for i in todo]), strict=True))
    for i, ids in encoded.items():
        if len(ids) + 1 > cfg.max_len:
            raise ValueError(
                f"line {i + 1} has {len(ids) + 1} tokens with EOS, more than the model's position "
                f"limit max_len={cfg.max_len}; shorten or split it"
            )
    todo.sort(key=lambda i: len(encoded[i]))
    start = 0
    while start < len(todo):
        # Sorted by length, so the last sentence of a batch is its longest.
        end = start + 1
        while end < len(todo) and (end - start + 1) * (len(encoded[todo[end]]) + 1) <= max_tokens:
            end += 1
        batch = todo[start:end]
        width = len(encoded[batch[-1]]) + 1
        src = torch.full((len(batch), width), cfg.pad_id, dtype=torch.long)
        for row, i in enumerate(batch):
            src[row, : len(encoded[i]) + 1] = torch.tensor([*encoded[i], cfg.eos_id])
        for i, out in zip(batch, greedy(model, src.to(device), max_extra), strict=True):
            results[i] = tgt_tokenizer.decode(out)
        start = end
    return results
