"""Sampling from a decoder-only language model: each prompt continued token by token from the
model's tempered, filtered distribution (`vaswani generate`), with its own random generator.
Translation's search is `vaswani.decoding.search`, whose stepper and filters this uses."""

from __future__ import annotations

import torch
from torch import Tensor

from vaswani.config import ModelConfig, Sampling
from vaswani.decoding.cache import new_cache
from vaswani.decoding.search import Hypothesis, Stepper, filter_logits, strip
from vaswani.model import DecoderOnly


def prompts_by_length(prompts: list[list[int]], cfg: ModelConfig) -> dict[int, list[int]]:
    """The indices of the prompts of each length; a prompt with a token id outside the
    vocabulary, or too long to leave room for a new token, is refused here, once (decoding steps
    do not check token ids: see `check_ids`)."""
    by_length: dict[int, list[int]] = {}
    for i, prompt in enumerate(prompts):
        if any(not 0 <= token < cfg.target_vocab_size for token in prompt):
            raise ValueError(
                f"prompt {i + 1} holds a token id outside the vocabulary "
                f"[0, {cfg.target_vocab_size})"
            )
        if len(prompt) + 1 >= cfg.max_len:
            raise ValueError(
                f"prompt {i + 1} has {len(prompt)} tokens; the model's position limit "
                f"max_len={cfg.max_len} leaves no room to generate"
            )
        by_length.setdefault(len(prompt), []).append(i)
    return by_length


def draw(
    log_probs: Tensor,
    temperature: float,
    top_k: int,
    top_p: float,
    generators: list[torch.Generator],
) -> Tensor:
    """Each row's next token: the most probable one at temperature 0; otherwise drawn from the
    filtered, tempered distribution with the row's own generator (inverse CDF: the first token
    whose cumulative probability exceeds a uniform draw). Shapes: (N, V) -> (N,)"""
    if temperature == 0:
        return log_probs.argmax(dim=-1)
    probs = filter_logits(log_probs / temperature, top_k, top_p).softmax(dim=-1)
    uniform = torch.cat([torch.rand(1, generator=g, device=probs.device) for g in generators])
    next_token = torch.searchsorted(probs.cumsum(dim=-1), uniform[:, None]).squeeze(1)
    return next_token.clamp(max=probs.size(-1) - 1)


@torch.no_grad()
def sample(
    model: DecoderOnly,
    prompts: list[list[int]],
    sampling: Sampling,
    use_cache: bool = True,
) -> list[Hypothesis]:
    """Continue each prompt of a decoder-only model by sampling as `sampling` says, until
    end-of-sentence or `sampling.max_new_tokens` (or the model's position limit).

    Each prompt gets its own random generator, seeded with seed + its index, so its output is the
    same whatever else is sampled with it. Prompts are token ids without the begin-of-sentence
    token, which is put before each. temperature 0 takes the most probable token (greedy).
    `Hypothesis.log_prob` is under the model's own distribution (temperature 1, no filtering).
    Padding and the start token are never drawn.
    """
    cfg = model.cfg
    max_new_tokens, seed = sampling.max_new_tokens, sampling.seed
    temperature, top_k, top_p = sampling.temperature, sampling.top_k, sampling.top_p
    device = next(model.parameters()).device
    never = torch.tensor(sorted({cfg.pad_id, cfg.bos_id}), device=device)
    results: list[Hypothesis | None] = [None] * len(prompts)
    # Prompts of one length are batched together, so no prompt is ever padded.
    for length, group in prompts_by_length(prompts, cfg).items():
        steps = min(max_new_tokens, cfg.max_len - 1 - length)
        generators = [torch.Generator(device).manual_seed(seed + i) for i in group]
        tokens = torch.tensor([[cfg.bos_id, *prompts[i]] for i in group], device=device)
        stepper = Stepper(
            model, new_cache(model, capacity=length + 1 + steps if use_cache else 0), use_cache
        )
        log_prob = torch.zeros(len(group), device=device)
        stopped = torch.zeros(len(group), dtype=torch.bool, device=device)
        for _ in range(steps):
            logits, normaliser = stepper(tokens)  # (N, V), (N,)
            log_probs = logits - normaliser[:, None]
            # Padding and the start token are never a language model's targets: never draw them.
            allowed = log_probs.index_fill(1, never, float("-inf"))
            next_token = draw(allowed, temperature, top_k, top_p, generators)
            next_token = next_token.masked_fill(stopped, cfg.pad_id)
            log_prob += (
                log_probs.gather(1, next_token[:, None]).squeeze(1).masked_fill(stopped, 0.0)
            )
            tokens = torch.cat([tokens, next_token[:, None]], dim=1)
            stopped |= next_token == cfg.eos_id
            if bool(stopped.all()):
                break
        rows = tokens[:, 1 + length :].tolist()
        for i, row, lp in zip(group, rows, log_prob.tolist(), strict=True):
            out = strip(row, cfg.eos_id, cfg.pad_id)
            results[i] = Hypothesis(out, lp, lp, len(out) < len(row))
    return [r for r in results if r is not None]
