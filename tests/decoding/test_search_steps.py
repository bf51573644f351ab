"""The pieces of one search step: the output layer, the normaliser, the top-k and the beam
extensions, each against the plain computation it replaces."""

import pytest
import torch

from vaswani.config import ModelConfig
from vaswani.decoding.output import OutputLayer, log_normaliser, top_k_rows
from vaswani.decoding.quantize import quantize
from vaswani.decoding.search import best_extensions
from vaswani.model import Transformer


@pytest.mark.parametrize("width", [1000, 1024, 50, 7])  # a partial last block; short rows
def test_top_k_rows_equals_topk(width):
    torch.manual_seed(width)
    x = torch.randn(6, width)
    x[0, :20] = float("-inf")
    x[1] = float("-inf")  # a row with nothing finite still gives k values
    x[2, 999 % width] = 50.0  # the largest in the last block
    k = min(5, width)
    values, columns = top_k_rows(x, k, block=16)
    expected = x.topk(k, dim=-1)
    assert torch.equal(values, expected.values)
    finite = torch.isfinite(values)
    assert torch.equal(columns[finite], expected.indices[finite])  # no ties among finite values
    assert torch.equal(x.gather(1, columns), values)


def test_the_normaliser_is_logsumexp_whatever_the_chunk():
    torch.manual_seed(0)
    logits = torch.randn(9, 300) * 20
    for chunk in (1, 300, 301, 1000, 1 << 20):
        torch.testing.assert_close(log_normaliser(logits, chunk), logits.logsumexp(dim=-1))


def test_best_extensions_equal_ranking_every_normalised_extension():
    torch.manual_seed(1)
    n, k, vocab = 5, 3, 400
    scores = torch.randn(n, k) * 3
    scores[:, 1:] = scores[:, 1:].sort(dim=1, descending=True).values
    scores[0, 1:] = float("-inf")  # a sentence's first step: one live beam
    logits = torch.randn(n * k, vocab) * 4
    logits[:, 7] = float("-inf")  # forbidden tokens
    top_scores, rows, tokens = best_extensions(scores, logits, log_normaliser(logits))

    every = (scores.view(-1, 1) + torch.log_softmax(logits, dim=-1)).view(n, k * vocab)
    expected_scores, flat = every.topk(2 * k, dim=1)
    torch.testing.assert_close(top_scores, expected_scores)
    first_row = torch.arange(n)[:, None] * k
    assert torch.equal(rows, first_row + flat // vocab)
    assert torch.equal(tokens, flat % vocab)


def small_model(**overrides) -> Transformer:
    torch.manual_seed(0)
    cfg = ModelConfig.from_preset("tiny", dropout=0.0, tie_embeddings="none", **overrides)
    return Transformer(cfg).eval()


@pytest.mark.parametrize("bias", [False, True])
def test_the_output_layer_gives_the_projection_or_its_shortlisted_columns(bias):
    model = small_model(output_bias=bias)
    projection = model.output_projection
    if bias:
        torch.nn.init.normal_(projection.bias)
    h = torch.randn(4, 3, model.cfg.d_model)
    full = OutputLayer(projection)
    with torch.no_grad():
        expected = projection(h)
        torch.testing.assert_close(full(h), expected)
        tokens = torch.tensor([2, 5, 9, 40])
        short = OutputLayer(projection, tokens)
        torch.testing.assert_close(short(h), expected[..., tokens])
        # The buffer is reused: a second, smaller call is still right.
        torch.testing.assert_close(short(h[:2]), expected[:2][..., tokens])
    assert short.size == 4 and full.size == model.cfg.target_vocab_size
    assert torch.equal(short.ids(torch.tensor([0, 3])), torch.tensor([2, 40]))
    assert (short.column(9), short.column(3), short.column(41)) == (2, None, None)
    assert full.column(17) == 17


def test_the_output_layer_keeps_gradients_outside_decoding():
    model = small_model()
    h = torch.randn(2, 1, model.cfg.d_model)
    OutputLayer(model.output_projection)(h).sum().backward()
    assert model.output_projection.weight.grad is not None


def test_an_int8_output_layer_over_a_shortlist_matches_its_full_vocabulary():
    model = quantize(small_model(), "int8", torch.device("cpu"))
    h = torch.randn(3, 1, model.cfg.d_model)
    tokens = torch.tensor([0, 1, 2, 30, 31])
    with torch.no_grad():
        full = OutputLayer(model.output_projection)(h)
        short = OutputLayer(model.output_projection, tokens)(h)
    # The shortlist dequantizes int8 weights; the full layer also quantizes the activations.
    torch.testing.assert_close(short, full[..., tokens], atol=0.05, rtol=0.05)
