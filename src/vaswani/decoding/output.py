"""The output projection as a decoding loop uses it: over the whole target vocabulary or over a
shortlist of it, written into one buffer that every step reuses; and the two reductions search
makes over its logits, done without a temporary as large as they are.

A step's logits are the largest tensor of decoding (128 rows x 58,101 tokens = 30 MB for a batch of
32 sentences with 4 beams at OPUS-MT's size). A fresh tensor of that size is fresh memory from the
operating system every step, and touching it first is not free: reusing one buffer made beam
search 7% faster there (fp32, 2 cores).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from vaswani.kernels import on_onednn


class OutputLayer:
    """Logits of decoder states over `tokens` (sorted target ids; None: every id), so column c
    stands for token `ids(c)`.

    The float weights of an `nn.Linear` are used as they are (rows of a shortlist copied once).
    A quantized layer (`--quantize int8`) runs as it is over the whole vocabulary; over a
    shortlist its chosen rows are dequantized once, so they cost float32 time, over few rows.
    """

    def __init__(self, layer: nn.Module, tokens: Tensor | None = None) -> None:
        self.tokens = tokens
        self.source = layer
        self.layer: nn.Module | None = None
        self.weight: Tensor | None = None
        self.bias: Tensor | None = None
        self.buffer: Tensor | None = None
        if isinstance(layer, nn.Linear):
            self.weight, self.bias = layer.weight, layer.bias
        elif tokens is None:
            self.layer = layer
        else:  # a quantized layer: its weight and bias are methods
            self.weight, self.bias = layer.weight().dequantize(), layer.bias()
        if tokens is not None:
            self.weight = self.weight.index_select(0, tokens)
            self.bias = None if self.bias is None else self.bias.index_select(0, tokens)

    @property
    def size(self) -> int:
        """The number of columns: tokens scored each step."""
        if self.tokens is not None:
            return self.tokens.numel()
        return self.layer.out_features if self.weight is None else self.weight.size(0)

    def ids(self, columns: Tensor) -> Tensor:
        """The token ids of logit columns."""
        return columns if self.tokens is None else self.tokens[columns]

    def columns(self, tokens: Tensor) -> Tensor:
        """The column of each of `tokens` (N,), which must all be scored."""
        if self.tokens is None:
            return tokens
        return torch.searchsorted(self.tokens, tokens)

    def column(self, token: int) -> int | None:
        """The column of a token id; None when the shortlist leaves it out."""
        if self.tokens is None:
            return token
        at = int(torch.searchsorted(self.tokens, token))
        return at if at < self.tokens.numel() and int(self.tokens[at]) == token else None

    def __call__(self, h: Tensor) -> Tensor:
        """h (N, T, D) -> logits (N, T, columns). Outside autocast and oneDNN (`vaswani.kernels`) the
        result is the shared buffer, which the next call overwrites."""
        if self.weight is None:
            return self.layer(h)
        if (
            torch.is_autocast_enabled(h.device.type)  # autocast picks the precision
            or h.dtype != self.weight.dtype
            or (torch.is_grad_enabled() and self.weight.requires_grad)  # out= has no gradient
        ):
            return F.linear(h, self.weight, self.bias)
        if on_onednn(self.source, h):  # oneDNN writes its own output
            return torch.ops.mkldnn._linear_pointwise(h, self.weight, self.bias, "none", [], "")
        n, t, d = h.shape
        rows = n * t
        if self.buffer is None or self.buffer.size(0) < rows or self.buffer.dtype != h.dtype:
            self.buffer = h.new_empty(rows, self.weight.size(0))
        out = self.buffer[:rows]
        flat = h.reshape(rows, d)
        if self.bias is None:
            torch.mm(flat, self.weight.t(), out=out)
        else:
            torch.addmm(self.bias, flat, self.weight.t(), out=out)
        return out.view(n, t, -1)


def log_normaliser(logits: Tensor, chunk: int = 1 << 20) -> Tensor:
    """logsumexp over each row, a few rows at a time: a temporary as large as the logits (30 MB for
    128 rows of a 58k vocabulary) is fresh memory every step, and touching it first costs more
    (measured 18 ms a step, OPUS-MT shape, beam 4) than the arithmetic (4 ms).

    Shapes: (N, V) -> (N,)
    """
    rows = max(1, chunk // logits.size(-1))
    return torch.cat([torch.logsumexp(part, dim=-1) for part in logits.split(rows)])


def top_k_rows(x: Tensor, k: int, block: int = 64) -> tuple[Tensor, Tensor]:
    """The k largest values of each row and their columns, largest first, as `Tensor.topk` gives
    them, about 5x faster on rows as long as a vocabulary (1.4 vs 7.9 ms for 128 x 58,101, k 8).

    The k largest of a row lie in the k blocks (of `block` columns) with the largest maxima: those
    k blocks hold k values at least as large as the k-th largest maximum, so anything smaller than
    it is not among the k largest. One pass finds the block maxima; the full sort runs over the
    k chosen blocks only (and the last, partial block). Tied values may come back at other columns
    than `topk` would pick; the values are the same.

    Shapes: x (N, V) -> values (N, k), columns (N, k)
    """
    n, width = x.shape
    blocks = width // block
    if blocks <= 4 * k:  # short rows: nothing to save
        return x.topk(k, dim=-1)
    maxima = x.unfold(1, block, block).amax(dim=-1)  # (N, blocks), a view's maxima: no copy
    chosen = maxima.topk(k, dim=-1).indices  # (N, k)
    columns = (chosen[:, :, None] * block + torch.arange(block, device=x.device)).view(n, -1)
    if blocks * block < width:
        tail = torch.arange(blocks * block, width, device=x.device)
        columns = torch.cat([columns, tail.expand(n, -1)], dim=1)
    values, picked = x.gather(1, columns).topk(k, dim=-1)
    return values, columns.gather(1, picked)
