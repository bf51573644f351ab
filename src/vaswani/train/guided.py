"""Guided alignment (Garg et al. 2019): one head of the last decoder layer's cross-attention
(`ModelConfig.alignment_head`) learns, at the step that predicts each target token, to point at the source tokens of the words
that the training pair's word alignment (`prepare --word-alignments`) links its word to. Its
loss is the cross-entropy between that head's attention and the alignment (uniform over the
linked source tokens), summed over the target tokens that have a link, times the weight
`--guided-alignment`, and added to the translation loss.

The head's attention is computed beside the fused attention from the layer's own queries and
keys (a forward hook), so the rest of the model runs as before.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

from vaswani.data import PreparedData
from vaswani.data.wordalign import load_alignments, read_links
from vaswani.train.step import TrainingError
from vaswani.translation.align import token_words


class GuidedAlignment:
    """The guided alignment loss of a model over the training split of a prepared dataset."""

    def __init__(self, model: nn.Module, data: PreparedData, weight: float) -> None:
        lines = load_alignments(data.directory, len(data.split("train")))
        if lines is None:
            raise TrainingError(
                f"guided_alignment={weight:g} needs word alignments: prepare {data.directory} "
                "again with word_alignments=True"
            )
        if len(lines) != len(data.split("train")):
            raise TrainingError(
                f"{data.directory}/train.align holds {len(lines)} lines for "
                f"{len(data.split('train'))} training pairs; prepare again"
            )
        try:
            self.links = [read_links(line) for line in lines]
        except ValueError as error:
            raise TrainingError(f"{data.directory}/train.align: {error}; prepare again") from None
        self.weight, self.head = weight, model.cfg.alignment_head or 0
        self.src_tok, self.tgt_tok = Vocabulary(data.src_tokenizer), Vocabulary(data.tgt_tokenizer)
        self.log_attention: Tensor | None = None
        model.decoder.layers[-1].cross_attn.register_forward_hook(self.capture)

    def capture(self, module: Any, args: tuple, output: Any) -> None:
        """The head's log-attention (B, T, S), from the cross-attention's queries and keys."""
        x, memory_kv, mask = args[0], args[1], args[2]
        q = module.split_heads(module.q_proj(x))[:, self.head].float()  # (B, T, Dh)
        k = memory_kv[0][:, self.head].float()  # (B, S, Dh)
        scores = q @ k.transpose(-2, -1) / math.sqrt(module.head_dim)
        if mask is not None:
            scores = scores.masked_fill(~mask[:, 0], float("-inf"))
        self.log_attention = torch.log_softmax(scores, dim=-1)

    def gold(self, split: Any, indices: Any, shape: torch.Size) -> Tensor:
        """The alignment of each pair of the batch as attention: (B, T, S), rows of target
        tokens without a link all zero."""
        gold = torch.zeros(shape)
        for row, i in enumerate(indices):
            links = self.links[int(i)]
            if not links:
                continue
            src, tgt = split.pair(int(i))
            src_words = token_words(self.src_tok, src.tolist())
            tgt_words = token_words(self.tgt_tok, tgt.tolist())
            by_target: dict[int, list[int]] = {}
            for s_word, t_word in links:
                by_target.setdefault(t_word, []).append(s_word)
            for t, word in enumerate(tgt_words[: shape[1]]):
                wanted = set(by_target.get(word, ()))
                columns = [c for c, w in enumerate(src_words[: shape[2]]) if w in wanted]
                if columns:
                    gold[row, t, columns] = 1.0 / len(columns)
        return gold

    def loss(self, split: Any, indices: Any) -> Tensor:
        """The weighted loss of the batch just run forward (a sum over target tokens)."""
        if self.log_attention is None:
            raise TrainingError("guided alignment: the last decoder layer was not run")
        log_attention, self.log_attention = self.log_attention, None
        gold = self.gold(split, indices, log_attention.shape).to(log_attention.device)
        terms = -(gold * log_attention.masked_fill(gold == 0, 0.0)).sum(dim=-1)
        return self.weight * terms.sum()


class Vocabulary:
    """A tokenizer's vocabulary, read once (`token_words` asks for it for every pair)."""

    def __init__(self, tokenizer: Any) -> None:
        self.entries = tokenizer.vocabulary()

    def vocabulary(self) -> list[str]:
        return self.entries
