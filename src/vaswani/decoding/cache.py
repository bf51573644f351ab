"""The KV cache of decoding: what the decoder keeps between steps, and where it keeps it.

`KVCache` stores one row per sequence; `BeamCache` stores the k beams of a sentence in one row
(see its docstring). Both are the model's `DecoderState`: the decoder asks the cache how its new
positions are laid out (`begin_step_`), hands it each layer's new keys and values (`keep`) and asks
for the cache that follows (`advanced`); it does no layout arithmetic of its own. Beam search asks
it to `reorder_` rows. `new_cache` makes the empty cache a decoding starts from.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch
from torch import Tensor

from vaswani.model import DecoderOnly, Transformer, WholeSequence
from vaswani.model.attention import KV


def write_at(buffer: Tensor | None, used: int, new: Tensor, capacity: int = 0) -> Tensor:
    """Write `new` (B, H, L, Dh) at positions used .. used + L of a key or value buffer.

    The buffer (B, H, room, Dh) is written in place while it has room, and otherwise replaced by
    one at least twice as long (or `capacity` long), so decoding T tokens copies O(T) cache
    entries in all, where growing by `torch.cat` would copy O(T^2).
    """
    end = used + new.size(2)
    if buffer is None or buffer.size(2) < end:
        room = max(capacity, end if buffer is None else 2 * end)
        grown = new.new_empty(new.size(0), new.size(1), room, new.size(3))
        if buffer is not None:
            grown[:, :, :used] = buffer[:, :, :used]
        buffer = grown
    buffer[:, :, used:end] = new
    return buffer


def select_rows(t: Tensor, rows: Tensor, in_place: bool, used: int | None = None) -> Tensor:
    """Rows `rows` of `t` (dim 0). in_place: written over t's first rows (the rows are gathered
    first, so any order is safe) and returned as a view of them; `used`: only that many positions
    move (the filled part of a key/value buffer; the rest of its room is left as it is)."""
    if not in_place:
        return t.index_select(0, rows)
    if used is None:
        t[: rows.size(0)] = t.index_select(0, rows)
    else:
        t[: rows.size(0), :, :used] = t[:, :, :used].index_select(0, rows)
    return t[: rows.size(0)]


@dataclass
class KVCache(WholeSequence):
    """What decoding keeps between steps; passed to each step, which returns the cache to go on
    from. A step writes its new keys and values into the buffers in place when they have room,
    so the cache passed in is used up: `reorder` (a copy) before branching from one cache twice.

    self_kv: per decoder layer, self-attention key and value buffers (B, H, room, Dh) whose first
        `slots` positions are filled; None before the first step.
    cross_kv: per decoder layer, encoder-decoder attention keys/values, (B, H, S, Dh) each, computed
        once per source; None for a decoder-only model.
    memory_mask: (B, 1, 1, S) source padding mask; None for a decoder-only model.
    length: number of target positions decoded so far (the position of the next token).
    capacity: positions to reserve room for when the buffers are first made (0: exactly what the
        first call needs); decoding sets it to its length limit, so the buffers never regrow.
    """

    self_kv: list[KV | None] = dataclasses.field(default_factory=list)
    capacity: int = 0

    @property
    def slots(self) -> int:
        """Key positions stored per row so far."""
        return self.length

    @property
    def room(self) -> int:
        """Key positions to reserve per row."""
        return self.capacity

    def keep(self, layer: int, k: Tensor, v: Tensor) -> tuple[KV, KV]:
        """Layer `layer`'s new keys and values (B, H, L, Dh) written after the `slots` stored ones
        (in place while the buffers have room): the buffers, and views of their filled part."""
        past = self.self_kv[layer]
        if past is None and self.room <= k.size(2):
            return (k, v), (k, v)  # one call over whole sequences: nothing to keep room for
        keys = write_at(None if past is None else past[0], self.slots, k, self.room)
        values = write_at(None if past is None else past[1], self.slots, v, self.room)
        end = self.slots + k.size(2)
        return (keys, values), (keys[:, :, :end], values[:, :, :end])

    def advanced(self, kept: list[KV], positions: int) -> KVCache:
        """The cache after a step that decoded `positions` more, with its layers' buffers."""
        return dataclasses.replace(self, self_kv=kept, length=self.length + positions)

    def self_keys_values(self, layer: int) -> KV:
        """The self-attention keys and values of `layer` so far, (B, H, slots, Dh)."""
        kv = self.self_kv[layer]
        if kv is None:
            raise ValueError("nothing has been decoded into this cache yet")
        return kv[0][:, :, : self.slots], kv[1][:, :, : self.slots]

    def reorder(self, indices: Tensor, same_sources: bool = False) -> KVCache:
        """A new cache whose row i is row `indices[i]` of this one (beam search keeps, copies
        beams). same_sources: the caller promises that every row keeps its source sentence
        (beams of one sentence trade places), so the encoder keys/values are kept as they are."""
        return self._reorder(indices, same_sources, in_place=False)

    def reorder_(self, indices: Tensor, same_sources: bool = False) -> KVCache:
        """`reorder` into this cache's buffers (no more rows than it has); this cache is used up.
        Decoding does this every step: allocating fresh buffers of that size each time costs
        several times more than the copy itself."""
        if indices.size(0) > self.memory_rows():
            raise ValueError("an in-place reorder cannot add rows; use reorder")
        return self._reorder(indices, same_sources, in_place=True)

    def _reorder(self, indices: Tensor, same_sources: bool, in_place: bool) -> KVCache:
        def pick(t: Tensor, used: int | None = None) -> Tensor:
            return select_rows(t, indices, in_place, used)

        keep_memory = same_sources or self.cross_kv is None
        return dataclasses.replace(
            self,
            self_kv=[
                None if kv is None else (pick(kv[0], self.slots), pick(kv[1], self.slots))
                for kv in self.self_kv
            ],
            cross_kv=self.cross_kv
            if keep_memory
            else [(pick(k), pick(v)) for k, v in self.cross_kv],
            memory_mask=self.memory_mask
            if same_sources or self.memory_mask is None
            else self.memory_mask.index_select(0, indices),
        )

    def memory_rows(self) -> int:
        """The number of rows (sequences) this cache holds."""
        tensors = [kv[0] for kv in self.self_kv if kv is not None] + [
            k for k, _ in self.cross_kv or []
        ]
        return tensors[0].size(0) if tensors else 0


@dataclass
class BeamCache(KVCache):
    """A cache for beam search that never copies keys: the decoder takes (B*k, 1) tokens a step,
    beams b*k .. b*k+k-1 of sentence b, but keeps one row per sentence.

    The k beams' keys of position t are stored side by side at slots t*k .. t*k+k-1 of their
    sentence's row, and are never moved. A beam's history is a path through those slots, recorded
    in `ancestry`; the k beams of a sentence attend as k queries over its slots, each masked to its
    own path, and over one copy of the encoder output. Reordering beams then gathers a few
    booleans instead of copying every beam's keys and values each step.

    beams: k, hypotheses per sentence.
    ancestry: (B, k, room) booleans: which stored key each beam's history consists of.
    """

    beams: int = 2
    ancestry: Tensor | None = None

    @property
    def slots(self) -> int:
        return self.length * self.beams

    @property
    def room(self) -> int:
        return self.capacity * self.beams

    def begin_step_(self, x: Tensor, need_weights: bool) -> tuple[Tensor, Tensor | None]:
        """Each sentence's k beams as k positions of one sequence, (B, k, D): projections,
        feed-forward and LayerNorm act per position anyway. Marks the k new slots in the ancestry
        (in place): each beam sees its own new key, and earlier slots as its history says."""
        if x.size(1) != 1 or need_weights:
            raise ValueError("a beam cache takes one new token per beam and step, no maps")
        k, start = self.beams, self.slots
        self.ancestry[:, :, start : start + k] = torch.eye(k, dtype=torch.bool, device=x.device)
        return x.view(-1, k, x.size(-1)), self.ancestry[:, None, :, : start + k]  # (B,1,k,slots)

    def _reorder(self, indices: Tensor, same_sources: bool, in_place: bool) -> KVCache:
        """indices (B'*k,) name beams b*k + j; each group of k must come from one sentence. Keys
        stay where they are; only the ancestry follows the beams."""
        del same_sources  # a sentence's row always keeps its source
        k = self.beams
        groups = indices.view(-1, k)  # (B', k)
        sentences = groups[:, 0] // k  # (B',)
        if not bool((groups // k == sentences[:, None]).all()):
            raise ValueError("a beam cache can only reorder beams within their own sentence")
        parents = groups % k  # (B', k)
        same = sentences.size(0) == self.ancestry.size(0) and bool(
            (sentences == torch.arange(sentences.size(0), device=sentences.device)).all()
        )

        def pick(t: Tensor, used: int | None = None) -> Tensor:
            return t if same else select_rows(t, sentences, in_place, used)

        ancestry = pick(self.ancestry)
        return dataclasses.replace(
            self,
            self_kv=[
                None if kv is None else (pick(kv[0], self.slots), pick(kv[1], self.slots))
                for kv in self.self_kv
            ],
            cross_kv=None
            if self.cross_kv is None
            else [(pick(a), pick(b)) for a, b in self.cross_kv],
            memory_mask=None if self.memory_mask is None else pick(self.memory_mask),
            ancestry=ancestry.gather(1, parents[:, :, None].expand(-1, -1, ancestry.size(2))),
        )

    def reorder_(self, indices: Tensor, same_sources: bool = False) -> KVCache:
        return self._reorder(indices, same_sources, in_place=True)


def new_cache(
    model: Transformer | DecoderOnly,
    memory: Tensor | None = None,
    src_mask: Tensor | None = None,
    capacity: int = 0,
    beams: int = 1,
) -> KVCache:
    """An empty cache for decoding with `model`: for an encoder-decoder, of `memory` (B, S, D) with
    its `src_mask`, the encoder-decoder keys and values computed once here.

    capacity: the most target positions decoding will reach, to reserve room for at once.
    beams: decode `beams` hypotheses per sentence, rows b*beams .. b*beams+beams-1 of each step's
        tokens, sharing one cache row per sentence (needs a capacity; see `BeamCache`).
    """
    if hasattr(model, "new_cache"):  # an ensemble (`vaswani.decoding.ensemble`) makes its own
        return model.new_cache(memory, src_mask, capacity, beams)
    empty: list[KV | None] = [None] * len(model.decoder.layers)
    if memory is None:
        return KVCache(self_kv=empty, capacity=capacity)
    cross_kv = model.cross_keys_values(memory)
    if beams == 1:
        return KVCache(cross_kv, src_mask, 0, empty, capacity)
    if capacity < 1:
        raise ValueError("a cache for several beams needs a capacity")
    ancestry = torch.zeros(
        memory.size(0), beams, capacity * beams, dtype=torch.bool, device=memory.device
    )
    return BeamCache(cross_kv, src_mask, 0, empty, capacity, beams, ancestry)
