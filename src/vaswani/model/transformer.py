"""The encoder and decoder stacks, the KV cache, and the three model families built from them.

Notation (used in every shape comment):
    B batch, S source length, T target length, H heads, D d_model, Dh = D / H, V vocabulary size.

`Transformer` is the paper's encoder-decoder (§3, Figure 1). `EncoderOnly` (BERT-style),
`EncoderClassifier` (an encoder with a pooled classification head) and `DecoderOnly` (GPT-style
language model) are built from the same `EncoderLayer` and `DecoderLayer`.
Every `forward` returns logits (training may pass a head that turns the last states into its loss
instead); losses live in training code and search lives in `vaswani.decode`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import Tensor, nn

from vaswani.config import ModelConfig
from vaswani.model.attention import KV
from vaswani.model.cache import BeamCache, KVCache
from vaswani.model.embeddings import Embeddings
from vaswani.model.layers import DecoderLayer, EncoderLayer, padding_mask
from vaswani.model.output import OutputLayer

Head = Callable[[Tensor], Any]
"""What turns the decoder's last states into a forward pass's result (the output projection's logits
by default)."""


def check_ids(
    ids: Tensor, vocab_size: int, max_len: int, what: str, offset: int = 0, values: bool = True
) -> None:
    """Raise a clear ValueError for input the model cannot take, instead of an error deep inside.

    values=False checks the shape, type and positions only: the vocabulary range check reads the
    tensor back (on a GPU, a sync that stalls the pipeline), so it is done where input enters
    (`forward`, `encode`), not on every decoding step, whose tokens the model chose itself."""
    if not isinstance(ids, Tensor) or ids.dim() != 2:
        shape = tuple(ids.shape) if isinstance(ids, Tensor) else type(ids).__name__
        raise ValueError(f"{what} must be a (batch, length) tensor of token ids, got {shape}")
    if ids.dtype not in (torch.int64, torch.int32):
        raise ValueError(f"{what} must hold integer token ids (int64), got dtype {ids.dtype}")
    if ids.size(0) == 0 or ids.size(1) == 0:
        raise ValueError(
            f"{what} is empty (shape {tuple(ids.shape)}); every sequence needs at least one token "
            "(an empty sentence is just the end-of-sentence token)"
        )
    end = offset + ids.size(1)
    if end > max_len:
        raise ValueError(
            f"{what} reaches position {end} but the model's position limit is max_len={max_len}; "
            "shorten the input or use a model configured with a larger max_len"
        )
    if not values:
        return
    low, high = torch.aminmax(ids)
    if low.item() < 0 or high.item() >= vocab_size:
        bad = low.item() if low.item() < 0 else high.item()
        raise ValueError(f"{what} holds token id {bad}, outside the vocabulary [0, {vocab_size})")


@dataclass
class AttentionMaps:
    """Attention weights per layer, for inspection: lists of (B, H, query length, key length)."""

    encoder: list[Tensor] = field(default_factory=list)
    decoder_self: list[Tensor] = field(default_factory=list)
    cross: list[Tensor] = field(default_factory=list)


class Encoder(nn.Module):
    """Embeddings and a stack of `EncoderLayer`s (§3.1); a final LayerNorm when pre-norm.

    Shapes: ids (B, S), mask (B, 1, 1, S) -> (B, S, D)
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.embed = Embeddings(cfg.vocab_size, cfg)
        self.layers = nn.ModuleList(EncoderLayer(cfg) for _ in range(cfg.n_encoder_layers))
        # Pre-norm leaves the residual stream un-normalised; post-norm ends normalised already.
        self.final_norm = (
            nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
            if cfg.norm == "pre"
            else nn.Identity()
        )

    def forward(self, ids: Tensor, mask: Tensor, maps: AttentionMaps | None = None) -> Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x, weights = layer(x, mask, need_weights=maps is not None)
            if maps is not None:
                maps.encoder.append(weights)
        return self.final_norm(x)


class Decoder(nn.Module):
    """Embeddings and a stack of `DecoderLayer`s (§3.1); a final LayerNorm when pre-norm.

    One code path serves training and decoding: the teacher-forced pass over a whole target is a
    single step from an empty cache.

    Shapes: ids (B, T) at positions cache.length .. cache.length + T - 1 -> (B, T, D)
    """

    def __init__(self, cfg: ModelConfig, cross_attention: bool = True) -> None:
        super().__init__()
        self.embed = Embeddings(cfg.target_vocab_size, cfg)
        self.layers = nn.ModuleList(
            DecoderLayer(cfg, cross_attention) for _ in range(cfg.n_decoder_layers)
        )
        self.final_norm = (
            nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
            if cfg.norm == "pre"
            else nn.Identity()
        )

    def forward(
        self, ids: Tensor, cache: KVCache, maps: AttentionMaps | None = None
    ) -> tuple[Tensor, KVCache]:
        # The cache lays out the new positions (a beam cache: each sentence's beams as one row).
        x, self_mask = cache.begin_step_(self.embed(ids, offset=cache.length), maps is not None)
        new_kv: list[KV | None] = []
        for i, layer in enumerate(self.layers):
            x, kv, self_w, cross_w = layer(
                x,
                self_mask,
                memory_kv=None if cache.cross_kv is None else cache.cross_kv[i],
                memory_mask=cache.memory_mask,
                past=cache.self_kv[i],
                past_len=cache.slots,
                need_weights=maps is not None,
                capacity=cache.room,
            )
            new_kv.append(kv)
            if maps is not None:
                maps.decoder_self.append(self_w)
                if cross_w is not None:
                    maps.cross.append(cross_w)
        return self.final_norm(x).view(*ids.shape, -1), cache.advanced(new_kv, ids.size(1))


def output_projection(cfg: ModelConfig, vocab_size: int) -> nn.Linear:
    """The pre-softmax linear transformation (§3.4), whose weight may be the embeddings'; a bias
    (starting at zero) only with `cfg.output_bias`."""
    linear = nn.Linear(cfg.d_model, vocab_size, bias=cfg.output_bias)
    nn.init.normal_(linear.weight, mean=0.0, std=cfg.d_model**-0.5)
    if linear.bias is not None:
        nn.init.zeros_(linear.bias)
    return linear


class Transformer(nn.Module):
    """The encoder-decoder Transformer (§3, Figure 1).

    Padding is `cfg.pad_id` in both source and target; targets are right-padded (a causal decoder
    never lets a real position see the padding after it).

    Shapes:
        forward: src_ids (B, S), tgt_ids (B, T) -> logits (B, T, V)
        encode: src_ids (B, S) -> memory (B, S, D), src_mask (B, 1, 1, S)
        decode_step: tgt_ids (B, t) new tokens, cache -> logits (B, t, V), cache grown by t
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.decoder = Decoder(cfg)
        self.output_projection = output_projection(cfg, cfg.target_vocab_size)
        if cfg.tie_embeddings in ("decoder", "all"):
            self.output_projection.weight = self.decoder.embed.token.weight
        if cfg.tie_embeddings == "all":
            self.encoder.embed.token.weight = self.decoder.embed.token.weight

    def forward(self, src_ids: Tensor, tgt_ids: Tensor, head: Head | None = None) -> Any:
        """Logits, or what `head` makes of the decoder's states instead of the output projection
        (training's loss: `vaswani.train.loss.LossHead`)."""
        check_ids(tgt_ids, self.cfg.target_vocab_size, self.cfg.max_len, "target")
        memory, src_mask = self.encode(src_ids)
        logits, _ = self.decode_step(tgt_ids, self.init_cache(memory, src_mask), head)
        return logits

    def encode(self, src_ids: Tensor) -> tuple[Tensor, Tensor]:
        check_ids(src_ids, self.cfg.vocab_size, self.cfg.max_len, "source")
        src_mask = padding_mask(src_ids, self.cfg.pad_id)  # (B, 1, 1, S), built once
        return self.encoder(src_ids, src_mask), src_mask

    def init_cache(
        self, memory: Tensor, src_mask: Tensor, capacity: int = 0, beams: int = 1
    ) -> KVCache:
        """An empty cache for decoding `memory`: encoder-decoder keys/values computed once here.

        capacity: the most target positions decoding will reach, to reserve room for at once.
        beams: decode `beams` hypotheses per sentence, rows b*beams .. b*beams+beams-1 of each
            step's tokens, sharing one cache row per sentence (needs a capacity; see `KVCache`).
        """
        cross_kv = [layer.cross_attn.project_memory(memory) for layer in self.decoder.layers]
        empty = [None] * len(self.decoder.layers)
        if beams == 1:
            return KVCache(empty, cross_kv, src_mask, 0, capacity)
        if capacity < 1:
            raise ValueError("a cache for several beams needs a capacity")
        ancestry = torch.zeros(
            memory.size(0), beams, capacity * beams, dtype=torch.bool, device=memory.device
        )
        return BeamCache(empty, cross_kv, src_mask, 0, capacity, beams, ancestry)

    def decode_step(
        self, tgt_ids: Tensor, cache: KVCache, output: OutputLayer | Head | None = None
    ) -> tuple[Any, KVCache]:
        """Logits of the next positions and the cache to go on from; `output`: the output
        projection to apply instead of `output_projection` (search's, over a shortlist or into
        a reused buffer)."""
        cfg = self.cfg
        check_ids(tgt_ids, cfg.target_vocab_size, cfg.max_len, "target", cache.length, values=False)
        h, cache = self.decoder(tgt_ids, cache)
        return (self.output_projection if output is None else output)(h), cache

    @torch.no_grad()
    def attention_maps(self, src_ids: Tensor, tgt_ids: Tensor) -> AttentionMaps:
        """Encoder self-, decoder self- and cross-attention weights of a teacher-forced pass."""
        maps = AttentionMaps()
        check_ids(src_ids, self.cfg.vocab_size, self.cfg.max_len, "source")
        check_ids(tgt_ids, self.cfg.target_vocab_size, self.cfg.max_len, "target")
        src_mask = padding_mask(src_ids, self.cfg.pad_id)
        memory = self.encoder(src_ids, src_mask, maps)
        self.decoder(tgt_ids, self.init_cache(memory, src_mask), maps)
        return maps


class EncoderOnly(nn.Module):
    """A stack of encoder layers over one sequence (BERT-style), with a vocabulary head.

    Shapes: ids (B, S) -> logits (B, S, V); `encode` gives the hidden states (B, S, D) and mask.
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.output_projection = output_projection(cfg, cfg.vocab_size)
        if cfg.tie_embeddings != "none":
            self.output_projection.weight = self.encoder.embed.token.weight

    def encode(self, ids: Tensor) -> tuple[Tensor, Tensor]:
        check_ids(ids, self.cfg.vocab_size, self.cfg.max_len, "input")
        mask = padding_mask(ids, self.cfg.pad_id)
        return self.encoder(ids, mask), mask

    def forward(self, ids: Tensor) -> Tensor:
        return self.output_projection(self.encode(ids)[0])


class DecoderOnly(nn.Module):
    """A stack of decoder layers without cross-attention: a causal language model (GPT-style).

    Shapes:
        forward: ids (B, T) -> logits (B, T, V)
        decode_step: ids (B, t) new tokens, cache -> logits (B, t, V), cache grown by t
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.decoder = Decoder(cfg, cross_attention=False)
        self.output_projection = output_projection(cfg, cfg.target_vocab_size)
        if cfg.tie_embeddings != "none":
            self.output_projection.weight = self.decoder.embed.token.weight

    def init_cache(self, capacity: int = 0) -> KVCache:
        """An empty cache; `capacity`: the most positions decoding will reach (room reserved)."""
        return KVCache([None] * len(self.decoder.layers), capacity=capacity)

    def decode_step(
        self, ids: Tensor, cache: KVCache, output: OutputLayer | Head | None = None
    ) -> tuple[Any, KVCache]:
        """Logits of the next positions and the cache to go on from; `output`: the output
        projection to apply instead of `output_projection` (search's, over a shortlist or into
        a reused buffer)."""
        cfg = self.cfg
        check_ids(ids, cfg.target_vocab_size, cfg.max_len, "input", cache.length, values=False)
        h, cache = self.decoder(ids, cache)
        return (self.output_projection if output is None else output)(h), cache

    def forward(self, ids: Tensor, head: Head | None = None) -> Any:
        """Logits, or what `head` makes of the states (as `Transformer.forward`)."""
        check_ids(ids, self.cfg.target_vocab_size, self.cfg.max_len, "input")
        return self.decode_step(ids, self.init_cache(), head)[0]

    @torch.no_grad()
    def attention_maps(self, ids: Tensor) -> AttentionMaps:
        check_ids(ids, self.cfg.target_vocab_size, self.cfg.max_len, "input")
        maps = AttentionMaps()
        self.decoder(ids, self.init_cache(), maps)
        return maps


class EncoderClassifier(nn.Module):
    """An encoder over one sequence, pooled into one vector, and a linear head over `n_labels`
    classes (a BERT-style sequence classifier).

    The classifier puts the start token (`bos_id`) before every input, so that position 0 belongs
    to no word: `pooling="first"` classifies from it (BERT's [CLS]); `pooling="mean"` averages the
    encoder's output over every real position (padding excluded).

    Shapes: ids (B, S) -> logits (B, n_labels); `pool` gives the pooled vectors (B, D).
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        if cfg.n_labels < 2:
            raise ValueError(f"a classifier needs n_labels >= 2, got {cfg.n_labels}")
        if cfg.bos_id == cfg.pad_id:
            raise ValueError("a classifier's start token (bos_id) must not be padding (pad_id)")
        self.cfg = cfg
        self.encoder = Encoder(cfg)
        self.dropout = nn.Dropout(cfg.dropout)
        self.head = nn.Linear(cfg.d_model, cfg.n_labels)

    def pool(self, ids: Tensor, maps: AttentionMaps | None = None) -> Tensor:
        check_ids(ids, self.cfg.vocab_size, self.cfg.max_len, "input", offset=1)
        start = ids.new_full((ids.size(0), 1), self.cfg.bos_id)
        ids = torch.cat([start, ids], dim=1)  # (B, 1 + S)
        mask = padding_mask(ids, self.cfg.pad_id)  # (B, 1, 1, 1 + S)
        h = self.encoder(ids, mask, maps)  # (B, 1 + S, D)
        if self.cfg.pooling == "first":
            return h[:, 0]
        real = mask[:, 0, 0, :, None].to(h.dtype)  # (B, 1 + S, 1)
        return (h * real).sum(dim=1) / real.sum(dim=1)  # (B, D); the start token is always real

    def forward(self, ids: Tensor) -> Tensor:
        return self.head(self.dropout(self.pool(ids)))

    @torch.no_grad()
    def attention_maps(self, ids: Tensor) -> AttentionMaps:
        maps = AttentionMaps()
        self.pool(ids, maps)
        return maps
