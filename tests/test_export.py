"""`vaswani export`: to CTranslate2 (same output as vaswani in fp32; int8 close), to Hugging Face
(same logits; import-marian reads it back), and --quantize int8 inside vaswani."""

import dataclasses
import json

import pytest
import torch

from helpers import cli
from vaswani import checkpoint as ckpt
from vaswani.config import DecodeConfig
from vaswani.data import PreparedData
from vaswani.decoding.quantize import QuantizeError, quantize, weight_bytes
from vaswani.decoding.text import Segments, TextModel, translate, translate_segments
from vaswani.export import ExportError, export, marian_refusals
from vaswani.marian import import_marian
from vaswani.metrics import score
from vaswani.translation.engine import load_run

ctranslate2 = pytest.importorskip("ctranslate2")
SOURCES = ["42", "1999", "271493", "700001", "15", "123456", "80808", "999999"]


@pytest.fixture(scope="module")
def run(numbers_run):
    return load_run(numbers_run)


def ct2_translate(model_dir, run, sources, **options):
    translator = ctranslate2.Translator(str(model_dir), device="cpu")
    vocab = run.src_tokenizer.vocabulary()
    index = {token: i for i, token in enumerate(run.tgt_tokenizer.vocabulary())}
    tokens = [[vocab[i] for i in run.src_tokenizer.encode(s)] for s in sources]
    results = translator.translate_batch(tokens, **options)
    if options.get("return_scores"):  # every hypothesis, with its score
        return [
            [
                (run.tgt_tokenizer.decode([index[t] for t in h]), s)
                for h, s in zip(r.hypotheses, r.scores, strict=True)
            ]
            for r in results
        ]
    return [run.tgt_tokenizer.decode([index[t] for t in r.hypotheses[0]]) for r in results]


def test_ctranslate2_output_equals_vaswani_greedy_and_beam(run, numbers_run, tmp_path):
    out = export(numbers_run, "ctranslate2", tmp_path / "ct2")
    assert (out / "model.bin").is_file() and (out / "vaswani_tokenizer").is_dir()
    greedy = translate(
        TextModel(run.model, run.src_tokenizer, run.tgt_tokenizer),
        SOURCES,
        DecodeConfig(beam_size=1),
    )
    assert ct2_translate(out, run, SOURCES, beam_size=1) == greedy
    # CTranslate2 divides a hypothesis' log-probability by length ** length_penalty: "plain".
    # It stops a sentence once beam_size hypotheses have finished (patience 1), where vaswani goes
    # on while a live beam could still beat them; with more patience it searches as far.
    beam = DecodeConfig(beam_size=4, alpha=1.0, length_penalty="plain", n_best=4)
    ours = translate_segments(run, Segments(SOURCES), beam)
    theirs = ct2_translate(
        out,
        run,
        SOURCES,
        beam_size=4,
        length_penalty=1.0,
        patience=4,
        num_hypotheses=4,
        return_scores=True,
    )
    assert [found[0][0] for found in theirs] == [found[0].text for found in ours]
    # ... and scores it as vaswani does (normalised log-probability of the best hypothesis).
    pairs = zip(ours, theirs, strict=True)
    assert all(abs(other[0][1] - mine[0].score) < 1e-3 for mine, other in pairs)


def test_ctranslate2_int8_scores_within_a_point_of_fp32(run, numbers_run, numbers_data, tmp_path):
    sources, references = PreparedData(numbers_data).text("test")
    sources, references = sources[:200], references[:200]
    fp32 = export(numbers_run, "ctranslate2", tmp_path / "fp32")
    int8 = export(numbers_run, "ctranslate2", tmp_path / "int8", quantization="int8")
    assert (int8 / "model.bin").stat().st_size < 0.5 * (fp32 / "model.bin").stat().st_size
    # Character BLEU: the targets are one word each (word BLEU is 0 for every output).
    full = score(ct2_translate(fp32, run, sources, beam_size=4), references, tokenize="char")
    small = score(ct2_translate(int8, run, sources, beam_size=4), references, tokenize="char")
    assert full.bleu > 50 and abs(full.bleu - small.bleu) <= 1.0, (full.bleu, small.bleu)


def test_huggingface_export_gives_the_same_logits_and_imports_back(run, numbers_run, tmp_path):
    transformers = pytest.importorskip("transformers")
    assert run.config.sinusoid_layout == "interleaved"  # exported through the feature permutation
    out = export(numbers_run, "huggingface", tmp_path / "hf")
    hf = transformers.MarianMTModel.from_pretrained(str(out)).eval()
    tokenizer = transformers.PreTrainedTokenizerFast.from_pretrained(str(out))
    src = torch.tensor([tokenizer("271493").input_ids])  # the tokenizer adds </s>
    assert src[0].tolist() == run.src_tokenizer.encode("271493") + [run.config.eos_id]
    tgt = torch.tensor([[run.config.bos_id, *run.tgt_tokenizer.encode("zweihundert")]])
    with torch.no_grad():
        ours = run.model(src, tgt)
        theirs = hf(input_ids=src, decoder_input_ids=tgt).logits
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=1e-4)

    back = load_run(import_marian(out, tmp_path / "back"))
    with torch.no_grad():
        torch.testing.assert_close(back.model(src, tgt), ours, atol=1e-4, rtol=1e-4)
    # Now in Marian's layout: export and import are exact inverses.
    again = load_run(
        import_marian(export(back.path, "huggingface", tmp_path / "hf2"), tmp_path / "back2")
    )
    assert again.config == back.config
    ours_state, theirs_state = ckpt.unique_state(back.model)[0], ckpt.unique_state(again.model)[0]
    assert ours_state.keys() == theirs_state.keys()
    assert all(torch.equal(ours_state[k], theirs_state[k]) for k in ours_state)


def test_what_a_format_cannot_represent_is_refused_by_name(run, numbers_run, tmp_path):
    pre = marian_refusals(dataclasses.replace(run.config, norm="pre"))
    assert any(p.startswith("norm='pre'") and "the model setting norm=post" in p for p in pre)
    learned = marian_refusals(dataclasses.replace(run.config, positions="learned"))
    assert any(p.startswith("positions='learned'") for p in learned)
    assert marian_refusals(run.config) == []
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ExportError, match="not an empty directory"):
        export(numbers_run, "huggingface", tmp_path / "full")
    with pytest.raises(ExportError, match="quantization='int8' is for to='ctranslate2'"):
        export(numbers_run, "huggingface", tmp_path / "q", quantization="int8")


def test_int8_inside_vaswani_translates_like_fp32(run, numbers_data):
    sources, references = PreparedData(numbers_data).text("test")
    sources, references = sources[:200], references[:200]
    int8 = quantize(run.model, "int8", torch.device("cpu"))
    assert type(int8.output_projection).__name__ == "Linear" and int8 is not run.model
    assert "quantized" in type(int8.output_projection).__module__
    assert weight_bytes(int8) < 0.5 * weight_bytes(run.model)  # int8 linear layers, float rest
    dc = DecodeConfig()
    full = translate(TextModel(run.model, run.src_tokenizer, run.tgt_tokenizer), sources, dc)
    small = translate(TextModel(int8, run.src_tokenizer, run.tgt_tokenizer), sources, dc)
    a, b = score(full, references, tokenize="char"), score(small, references, tokenize="char")
    assert abs(a.bleu - b.bleu) <= 1.0, (a.bleu, b.bleu)
    with pytest.raises(QuantizeError, match="runs on the CPU"):
        quantize(run.model, "int8", torch.device("meta"))


def test_the_export_command_and_quantize_flag(numbers_run, tmp_path, capsys):
    code, out, _ = cli(
        capsys,
        "export",
        str(numbers_run),
        "--to",
        "ctranslate2",
        "--out",
        str(tmp_path / "ct2"),
        "--quantization",
        "int8",
    )
    assert code == 0 and "exported" in out
    assert json.loads((tmp_path / "ct2" / "config.json").read_text())["add_source_eos"] is True
    code, out, err = cli(
        capsys,
        "translate",
        "--checkpoint",
        str(numbers_run),
        "--quantize",
        "int8",
        "--precision",
        "fp32",
        "271493",
    )
    assert code == 0 and "weights: int8" in err and out.strip()


def test_exporting_leaves_the_model_unchanged(run, tmp_path):
    # CTranslate2 quantizes the arrays it is given in place; they must be copies of the weights.
    from vaswani.export import save_ctranslate2

    before = {name: tensor.clone() for name, tensor in run.model.state_dict().items()}
    vocab = run.src_tokenizer.vocabulary()
    save_ctranslate2(run.model, vocab, vocab, tmp_path / "int8", "int8")
    after = run.model.state_dict()
    assert all(torch.equal(before[name], after[name]) for name in before)
