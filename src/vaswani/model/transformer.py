"""The encoder and decoder stacks, the decoder's state, and the three model families built from them.

Notation (used in every shape comment):
    B batch, S source length, T target length, H heads, D d_model, Dh = D / H, V vocabulary size.

`Transformer` is the paper's encoder-decoder (§3, Figure 1). `EncoderOnly` (BERT-style),
`EncoderClassifier` (an encoder with a pooled classification head) and `DecoderOnly` (GPT-style
language model) are built from the same `EncoderLayer` and `DecoderLayer`.
Every `forward` returns logits (training may pass a head that turns the last states into its loss
instead); losses live in training code, and the caches and search of decoding in
`vaswani.decoding`.

The decoder takes its state explicitly and returns the state to go on from (`DecoderState`): a
whole-sequence pass (training, attention maps) uses `WholeSequence`; decoding passes a cache whose
buffers and beam layout the model never sees.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from vaswani.config import ModelConfig
from vaswani.model.attention import KV
from vaswani.model.embeddings import Embeddings
from vaswani.model.layers import DecoderLayer, EncoderLayer, causal_mask, padding_mask

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


class DecoderState(Protocol):
    """What the decoder reads and keeps between calls.

    length: target positions decoded so far (the position of the next token).
    cross_kv: per decoder layer, the encoder output's keys and values (B, H, S, Dh) each, computed
        once per source; None for a decoder-only model. memory_mask: (B, 1, 1, S) or None.
    """

    length: int
    cross_kv: list[KV] | None
    memory_mask: Tensor | None

    def begin_step_(self, x: Tensor, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """The decoder's rows for new positions x (N, T, D) and their self-attention mask."""
        ...

    def keep(self, layer: int, k: Tensor, v: Tensor) -> tuple[KV, KV]:
        """Store layer `layer`'s new keys and values (`attention.Keep`)."""
        ...

    def advanced(self, kept: list[KV], positions: int) -> DecoderState:
        """The state after a step that decoded `positions` more and stored `kept` per layer."""
        ...


@dataclass
class WholeSequence:
    """The state of a pass over whole target sequences at once (training, attention maps): the
    positions attend causally among themselves, and nothing is kept for a next step."""

    cross_kv: list[KV] | None = None
    memory_mask: Tensor | None = None
    length: int = 0

    def begin_step_(self, x: Tensor, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        del need_weights  # every layout can give attention maps
        t = x.size(1)  # a single new position may attend to everything: no mask
        return x, causal_mask(t, self.length, x.device) if t > 1 else None

    def keep(self, layer: int, k: Tensor, v: Tensor) -> tuple[KV, KV]:
        return (k, v), (k, v)

    def advanced(self, kept: list[KV], positions: int) -> DecoderState:
        return self


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

    Shapes: ids (B, T) at positions state.length .. state.length + T - 1 -> (B, T, D)
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
        self, ids: Tensor, state: DecoderState, maps: AttentionMaps | None = None
    ) -> tuple[Tensor, DecoderState]:
        # The state lays out the new positions (a beam cache: each sentence's beams as one row).
        x, self_mask = state.begin_step_(self.embed(ids, offset=state.length), maps is not None)
        kept: list[KV] = []
        for i, layer in enumerate(self.layers):
            x, kv, self_w, cross_w = layer(
                x,
                self_mask,
                memory_kv=None if state.cross_kv is None else state.cross_kv[i],
                memory_mask=state.memory_mask,
                keep=partial(state.keep, i),
                need_weights=maps is not None,
            )
            kept.append(kv)
            if maps is not None:
                maps.decoder_self.append(self_w)
                if cross_w is not None:
                    maps.cross.append(cross_w)
        return self.final_norm(x).view(*ids.shape, -1), state.advanced(kept, ids.size(1))


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
        cross_keys_values: memory (B, S, D) -> per decoder layer, keys and values (B, H, S, Dh)
        decode_step: tgt_ids (B, t) new tokens, state -> logits (B, t, V), state grown by t
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
        (training's loss: `vaswani.loss.LossHead`)."""
        check_ids(tgt_ids, self.cfg.target_vocab_size, self.cfg.max_len, "target")
        memory, src_mask = self.encode(src_ids)
        state = WholeSequence(self.cross_keys_values(memory), src_mask)
        logits, _ = self.decode_step(tgt_ids, state, head)
        return logits

    def encode(self, src_ids: Tensor) -> tuple[Tensor, Tensor]:
        check_ids(src_ids, self.cfg.vocab_size, self.cfg.max_len, "source")
        src_mask = padding_mask(src_ids, self.cfg.pad_id)  # (B, 1, 1, S), built once
        return self.encoder(src_ids, src_mask), src_mask

    def cross_keys_values(self, memory: Tensor) -> list[KV]:
        """The encoder-decoder attention keys and values of every decoder layer (§3.2.3),
        computed once per source."""
        return [layer.cross_attn.project_memory(memory) for layer in self.decoder.layers]

    def decode_step(
        self, tgt_ids: Tensor, state: DecoderState, output: Head | None = None
    ) -> tuple[Any, DecoderState]:
        """Logits of the next positions and the state to go on from; `output`: the output
        projection to apply instead of `output_projection` (decoding's, over a shortlist or into
        a reused buffer; training's loss)."""
        cfg = self.cfg
        check_ids(tgt_ids, cfg.target_vocab_size, cfg.max_len, "target", state.length, values=False)
        h, state = self.decoder(tgt_ids, state)
        return (self.output_projection if output is None else output)(h), state

    @torch.no_grad()
    def attention_maps(self, src_ids: Tensor, tgt_ids: Tensor) -> AttentionMaps:
        """Encoder self-, decoder self- and cross-attention weights of a teacher-forced pass."""
        maps = AttentionMaps()
        check_ids(src_ids, self.cfg.vocab_size, self.cfg.max_len, "source")
        check_ids(tgt_ids, self.cfg.target_vocab_size, self.cfg.max_len, "target")
        src_mask = padding_mask(src_ids, self.cfg.pad_id)
        memory = self.encoder(src_ids, src_mask, maps)
        self.decoder(tgt_ids, WholeSequence(self.cross_keys_values(memory), src_mask), maps)
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
        decode_step: ids (B, t) new tokens, state -> logits (B, t, V), state grown by t
    """

    def __init__(self, cfg: ModelConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.decoder = Decoder(cfg, cross_attention=False)
        self.output_projection = output_projection(cfg, cfg.target_vocab_size)
        if cfg.tie_embeddings != "none":
            self.output_projection.weight = self.decoder.embed.token.weight

    def decode_step(
        self, ids: Tensor, state: DecoderState, output: Head | None = None
    ) -> tuple[Any, DecoderState]:
        """Logits of the next positions and the state to go on from (as `Transformer`'s)."""
        cfg = self.cfg
        check_ids(ids, cfg.target_vocab_size, cfg.max_len, "input", state.length, values=False)
        h, state = self.decoder(ids, state)
        return (self.output_projection if output is None else output)(h), state

    def forward(self, ids: Tensor, head: Head | None = None) -> Any:
        """Logits, or what `head` makes of the states (as `Transformer.forward`)."""
        check_ids(ids, self.cfg.target_vocab_size, self.cfg.max_len, "input")
        return self.decode_step(ids, WholeSequence(), head)[0]

    @torch.no_grad()
    def attention_maps(self, ids: Tensor) -> AttentionMaps:
        check_ids(ids, self.cfg.target_vocab_size, self.cfg.max_len, "input")
        maps = AttentionMaps()
        self.decoder(ids, WholeSequence(), maps)
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
