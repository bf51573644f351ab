import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from vaswani.data import PreparedData, PrepareOptions
from vaswani.data.batching import Position, TokenBatchSampler, collate
from vaswani.prepare import prepare


def random_lengths(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    return rng.integers(1, 60, n), rng.integers(1, 60, n)


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 400),
    budget=st.integers(61, 3000),
    seed=st.integers(0, 5),
    epoch=st.integers(0, 3),
)
def test_budget_is_never_exceeded_and_each_pair_appears_once_per_epoch(n, budget, seed, epoch):
    src, tgt = random_lengths(n, seed)
    sampler = TokenBatchSampler(src, tgt, budget, seed=seed)
    batches = sampler.batches(epoch)
    for batch in batches:
        assert len(batch) * (src[batch].max() + 1) <= budget
        assert len(batch) * (tgt[batch].max() + 1) <= budget
    assert sorted(np.concatenate(batches).tolist()) == list(range(n))


def test_batches_are_deterministic_given_the_seed_and_differ_between_epochs():
    src, tgt = random_lengths(2000)
    a = TokenBatchSampler(src, tgt, 2000, seed=7)
    b = TokenBatchSampler(src, tgt, 2000, seed=7)
    assert all(np.array_equal(x, y) for x, y in zip(a.batches(3), b.batches(3), strict=True))
    first, second = a.batches(0), a.batches(1)
    assert [x.tolist() for x in first] != [x.tolist() for x in second]
    other_seed = TokenBatchSampler(src, tgt, 2000, seed=8).batches(0)
    assert [x.tolist() for x in first] != [x.tolist() for x in other_seed]


def test_resuming_from_a_position_yields_exactly_the_remaining_batches():
    src, tgt = random_lengths(1500)
    sampler = TokenBatchSampler(src, tgt, 1500, seed=1)
    epoch0, epoch1 = sampler.batches(0), sampler.batches(1)
    k = len(epoch0) // 2
    # Walk k batches, keep the position, then start a fresh sampler from it.
    stream = sampler.iterate(Position())
    for _ in range(k):
        position, _ = next(stream)
    assert position == Position(0, k)
    fresh = TokenBatchSampler(src, tgt, 1500, seed=1).iterate(position)
    rest = [next(fresh)[1] for _ in range(len(epoch0) - k + 2)]
    expected = epoch0[k:] + epoch1[:2]
    assert all(np.array_equal(x, y) for x, y in zip(rest, expected, strict=True))


def test_last_batch_of_an_epoch_points_to_the_next_epoch():
    src, tgt = random_lengths(100)
    sampler = TokenBatchSampler(src, tgt, 1000)
    n = len(sampler.batches(0))
    stream = sampler.iterate(Position())
    positions = [next(stream)[0] for _ in range(n)]
    assert positions[-2] == Position(0, n - 1)
    assert positions[-1] == Position(1, 0)


def test_similar_lengths_are_grouped_so_padding_is_small():
    # Translations are about as long as their sources: lengths correlate, as in real corpora.
    rng = np.random.default_rng(0)
    src = rng.integers(1, 60, 5000)
    tgt = np.maximum(1, src + rng.integers(-5, 6, 5000))
    sampler = TokenBatchSampler(src, tgt, 4000)
    sorted_padding = sampler.padding_fraction()
    # The same batch sizes filled in random order, for comparison.
    order = rng.permutation(5000)
    sizes = [len(b) for b in sampler.batches(0)]
    chunks = np.split(order, np.cumsum(sizes)[:-1])
    real = (src + tgt + 2).sum()
    padded = sum(len(c) * (src[c].max() + tgt[c].max() + 2) for c in chunks)
    assert sorted_padding < 0.10 < 1 - real / padded


def test_a_budget_below_the_longest_pair_is_refused():
    with pytest.raises(ValueError, match="batch_tokens=10 is smaller than the longest pair"):
        TokenBatchSampler(np.array([3, 20]), np.array([4, 5]), 10)


def test_collate_adds_eos_and_bos_and_pads(tmp_path):
    prepare(
        ["numbers-de"],
        tmp_path / "n",
        PrepareOptions(vocab_size=300, numbers_size=300, progress=False),
    )
    data = PreparedData(tmp_path / "n")
    train = data.split("train")
    batch = collate(train, np.array([0, 1, 2]), pad_id=0, bos_id=1, eos_id=2)
    for row in range(3):
        src_ids, tgt_ids = train.pair(row)
        n, m = len(src_ids), len(tgt_ids)
        assert batch.src[row, :n].tolist() == src_ids.tolist() and batch.src[row, n] == 2
        assert (batch.src[row, n + 1 :] == 0).all()
        assert (
            batch.tgt_in[row, 0] == 1 and batch.tgt_in[row, 1 : m + 1].tolist() == tgt_ids.tolist()
        )
        assert batch.tgt_out[row, :m].tolist() == tgt_ids.tolist() and batch.tgt_out[row, m] == 2
        assert (batch.tgt_out[row, m + 1 :] == 0).all()
    assert batch.tgt_in.shape == batch.tgt_out.shape


def test_collate_pads_rows_of_any_length_an_empty_one_included():
    class Pairs:
        rows = [
            (np.array([5, 6, 7], np.uint16), np.array([], np.uint16)),
            (np.array([], np.uint16), np.array([8], np.uint16)),
        ]

        def pair(self, i):
            return self.rows[i]

    batch = collate(Pairs(), np.array([0, 1]), pad_id=0, bos_id=1, eos_id=2)
    assert batch.src.tolist() == [[5, 6, 7, 2], [2, 0, 0, 0]]
    assert batch.tgt_in.tolist() == [[1, 0], [1, 8]]
    assert batch.tgt_out.tolist() == [[2, 0], [8, 2]]
    assert batch.src.dtype == batch.tgt_in.dtype == batch.tgt_out.dtype == torch.long
