"""Token embeddings and positional encodings (§3.4, §3.5).

Notation: B batch, L sequence length, D d_model, V vocabulary size.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from vaswani.config import ModelConfig
from vaswani.kernels import Dropout


def sinusoidal_encoding(length: int, d_model: int, layout: str = "interleaved") -> Tensor:
    """§3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d_model)), PE(pos, 2i+1) = cos(same angle).

    i is the index of the (sin, cos) pair, so even columns hold sines and odd columns cosines,
    interleaved as in the paper. layout="halves" holds the same values with all the sines first,
    then all the cosines (Marian's order). layout="fairseq" is laid out as halves, with fairseq's
    frequencies: pair i's angle is pos / 10000^(i / (D/2 - 1)) (M2M-100, NLLB-200).
    Returns (length, d_model) in float32.
    """
    position = torch.arange(length, dtype=torch.float64).unsqueeze(1)  # (L, 1)
    pair = torch.arange(0, d_model, 2, dtype=torch.float64)  # 2i for each pair: (ceil(D/2),)
    exponent = pair / d_model
    if layout == "fairseq":
        exponent = (pair / 2) / max(d_model // 2 - 1, 1)
    angle = position / torch.pow(10000.0, exponent)  # (L, ceil(D/2))
    table = torch.zeros(length, d_model, dtype=torch.float64)
    table[:, 0::2] = torch.sin(angle)
    table[:, 1::2] = torch.cos(angle[:, : d_model // 2])  # odd d_model has one sine more
    if layout in ("halves", "fairseq"):
        table = torch.cat([table[:, 0::2], table[:, 1::2]], dim=1)
    return table.float()


class Embeddings(nn.Module):
    """Token embedding scaled by sqrt(d_model) plus positional encoding, then dropout (§3.4, §5.4);
    in training, with `cfg.word_dropout`, whole token embeddings are zeroed first (kept ones scaled
    by 1 / (1 - p)).

    Shapes:
        ids: (B, L) int64, positions start at `offset`
        returns: (B, L, D)
    """

    def __init__(self, vocab_size: int, cfg: ModelConfig) -> None:
        super().__init__()
        self.token = nn.Embedding(vocab_size, cfg.d_model)
        # Unit-variance embeddings after the sqrt(d_model) scale: N(0, d_model^-0.5).
        nn.init.normal_(self.token.weight, mean=0.0, std=cfg.d_model**-0.5)
        self.scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
        self.max_len = cfg.max_len
        self.offset = cfg.position_offset
        rows = cfg.max_len + cfg.position_offset
        if cfg.positions == "learned":
            self.learned = nn.Embedding(rows, cfg.d_model)
            nn.init.normal_(self.learned.weight, mean=0.0, std=cfg.d_model**-0.5)
        else:
            self.learned = None
            # A fixed function of the position: not a parameter, not saved in checkpoints.
            self.register_buffer(
                "sinusoid",
                sinusoidal_encoding(rows, cfg.d_model, cfg.sinusoid_layout),
                persistent=False,
            )
        self.norm = (
            nn.LayerNorm(cfg.d_model, eps=cfg.layer_norm_eps)
            if cfg.embedding_norm
            else nn.Identity()
        )
        self.dropout = Dropout(cfg.dropout)
        self.word_dropout = Dropout(cfg.word_dropout)  # on a (B, L, 1) mask: whole tokens

    def position_table(self, offset: int, length: int) -> Tensor:
        """Positions offset .. offset+length-1 as (length, D)."""
        start = self.offset + offset  # the table's row of position `offset`
        if self.learned is not None:
            return self.learned.weight[start : start + length]
        return self.sinusoid[start : start + length]

    def forward(self, ids: Tensor, offset: int = 0) -> Tensor:
        x = self.token(ids) * self.scale  # (B, L, D)
        if self.training and self.word_dropout.p > 0:
            x = x * self.word_dropout(x.new_ones(*ids.shape, 1))
        x = x + self.position_table(offset, ids.size(1))  # (L, D) broadcasts
        return self.dropout(self.norm(x))
