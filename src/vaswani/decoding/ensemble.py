"""Several translation models searched as one (an ensemble): at every step each member scores the
next token and their log-probabilities are averaged, so that greedy and beam search (and
everything built on them: `translate`, `vaswani distill --teacher A --teacher B`) work on an
ensemble as on one model. The average of log-probabilities is the log of the members'
distributions' geometric mean, which search normalises again.

The members must read and write the same token ids: one source and one target vocabulary (runs
trained on the same prepared data, with different seeds, sizes or budgets).

Shapes: encode (B, S) -> one memory per member; decode_step (N, t) -> (N, t, V) averaged
log-probabilities and the members' caches.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor, nn

from vaswani.decoding.cache import KVCache, new_cache
from vaswani.model import Transformer


class Ensemble(nn.Module):
    """Translation models of one vocabulary scored as one model (see the module's docstring)."""

    def __init__(self, members: list[Transformer]) -> None:
        super().__init__()
        if not members:
            raise ValueError("an ensemble needs at least one model")
        first = members[0].cfg
        for model in members[1:]:
            cfg = model.cfg
            same = (cfg.vocab_size, cfg.target_vocab_size, cfg.pad_id, cfg.bos_id, cfg.eos_id)
            if same != (
                first.vocab_size,
                first.target_vocab_size,
                first.pad_id,
                first.bos_id,
                first.eos_id,
            ):
                raise ValueError(
                    "the models of an ensemble must share their vocabularies and special tokens "
                    "(train them on the same prepared data)"
                )
        self.members = nn.ModuleList(members)
        # Positions every member accepts; the averaged log-probabilities are the output.
        self.cfg = dataclasses.replace(first, max_len=min(m.cfg.max_len for m in members))
        self.output_projection = Averaged(first.target_vocab_size)

    def encode(self, src_ids: Tensor) -> tuple[list[Tensor], Tensor]:
        memories, masks = zip(*(model.encode(src_ids) for model in self.members), strict=True)
        return list(memories), masks[0]

    def new_cache(
        self, memory: list[Tensor], src_mask: Tensor, capacity: int = 0, beams: int = 1
    ) -> EnsembleCache:
        """A cache per member (`vaswani.decoding.cache.new_cache` asks the ensemble for it)."""
        return EnsembleCache(
            [
                new_cache(model, x, src_mask, capacity, beams)
                for model, x in zip(self.members, memory, strict=True)
            ]
        )

    def decode_step(
        self, tgt_ids: Tensor, state: EnsembleCache, output: object = None
    ) -> tuple[Tensor, EnsembleCache]:
        """Each member's log-probabilities of the next positions, averaged; `output` (the
        identity search passes) is not used: each member has its own projection."""
        del output
        scores, caches = [], []
        for model, cache in zip(self.members, state.caches, strict=True):
            logits, cache = model.decode_step(tgt_ids, cache)
            scores.append(torch.log_softmax(logits.float(), dim=-1))
            caches.append(cache)
        return torch.stack(scores).mean(dim=0), EnsembleCache(caches)


class Averaged(nn.Identity):
    """The ensemble's "output projection": `decode_step` already gives the scores of all
    `out_features` tokens."""

    def __init__(self, out_features: int) -> None:
        super().__init__()
        self.out_features = out_features


@dataclass
class EnsembleCache:
    """Each member's `KVCache`, moved in step."""

    caches: list[KVCache]

    @property
    def length(self) -> int:
        return self.caches[0].length

    def reorder(self, indices: Tensor, same_sources: bool = False) -> EnsembleCache:
        return EnsembleCache([c.reorder(indices, same_sources) for c in self.caches])

    def reorder_(self, indices: Tensor, same_sources: bool = False) -> EnsembleCache:
        return EnsembleCache([c.reorder_(indices, same_sources) for c in self.caches])
