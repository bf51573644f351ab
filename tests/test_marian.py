"""Importing Hugging Face Marian / OPUS-MT models, checked against `transformers` itself.

No network: the Hugging Face side is built here. Two small SentencePiece models and a Marian
vocabulary are trained on a few sentence pairs, and a small `MarianMTModel` (SiLU activation, scaled
embeddings, a non-zero final logits bias) is trained on them for a few seconds, so that it ends its
sentences at varied lengths like a real model does, then saved with `save_pretrained`.
"""

import dataclasses
import json
import pickle
import shutil

import pytest
import torch
from transformers import MarianConfig, MarianMTModel, MarianTokenizer

from helpers import TOY_BART, Server, train_sentencepiece
from vaswani.checkpoint import CheckpointError
from vaswani.cli import main
from vaswani.config import DecodeConfig
from vaswani.decoding.search import beam_search, greedy
from vaswani.decoding.text import TextModel, translate
from vaswani.marian import MarianImportError, import_marian
from vaswani.plot import attention
from vaswani.run import RunError, load_trained
from vaswani.serve import ServeSettings, create_app
from vaswani.translation.engine import Engine, load_run
from vaswani.translation.request import Request

GERMAN = [
    "ein kleiner Hund läuft über die Straße",
    "das Haus ist groß und alt",
    "wir trinken heute Abend Tee",
    "die Kinder spielen im Garten",
    "er liest ein Buch über Berge",
    "sie kauft Brot und Milch",
]
ENGLISH = [
    "a small dog runs across the street",
    "the house is big and old",
    "we drink tea tonight",
    "the children play in the garden",
    "he reads a book about mountains",
    "she buys bread and milk",
]
# Held-out inputs too: unseen words, a character no piece covers, a language code.
INPUTS = [*GERMAN, "der Hund trinkt Milch", "Zürich ist schön!", ">>deu<< das Haus", ""]


def build_marian(directory, activation="swish", steps=200, codes=(">>deu<<",)) -> MarianMTModel:
    """A trained toy MarianMTModel saved in Hugging Face's format, with its tokenizer files;
    `codes`: the language tokens of its vocabulary (two or more: a multilingual model)."""
    directory.mkdir(parents=True)
    pieces = train_sentencepiece(GERMAN, directory / "source.spm")
    pieces += train_sentencepiece(ENGLISH, directory / "target.spm")
    # OPUS-MT's layout: </s> 0, <unk> 1, the pieces of both sides, language codes, <pad> last.
    vocab = {"</s>": 0, "<unk>": 1}
    for piece in pieces:
        vocab.setdefault(piece, len(vocab)) if piece not in ("<unk>", "<s>", "</s>") else None
    for language in codes:
        vocab[language] = len(vocab)
    vocab["<pad>"] = pad = len(vocab)
    (directory / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False))
    torch.manual_seed(0)
    config = MarianConfig(
        vocab_size=len(vocab),
        decoder_vocab_size=len(vocab),
        **TOY_BART,
        activation_function=activation,
        scale_embedding=True,
        pad_token_id=pad,
        decoder_start_token_id=pad,
        eos_token_id=0,
        forced_eos_token_id=None,
        dropout=0.1,
    )
    model = MarianMTModel(config)
    with torch.no_grad():
        model.final_logits_bias.normal_(0.0, 0.5)  # a buffer: training leaves it as it is
    tokenizer = MarianTokenizer(
        str(directory / "source.spm"), str(directory / "target.spm"), str(directory / "vocab.json")
    )
    batch = tokenizer(GERMAN, text_target=ENGLISH, padding=True, return_tensors="pt")
    batch["labels"][batch["labels"] == pad] = -100
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(steps):
        loss = model(**batch).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.eval().save_pretrained(directory)
    return model


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    directory = tmp_path_factory.mktemp("marian") / "opus-mt-toy"
    model = build_marian(directory)
    tokenizer = MarianTokenizer(
        str(directory / "source.spm"), str(directory / "target.spm"), str(directory / "vocab.json")
    )
    return directory, model, tokenizer


@pytest.fixture(scope="module")
def imported(hf, tmp_path_factory):
    run = tmp_path_factory.mktemp("runs") / "imported"
    import_marian(hf[0], run)
    return run, load_trained(run)


def hf_batch(tokenizer, texts):
    batch = tokenizer(texts, padding=True, return_tensors="pt")
    return batch["input_ids"], batch["attention_mask"]


def hf_generate(hf, texts, **settings):
    """The source ids of `texts` and Hugging Face's `generate` output for them, padding ruled out
    (what OPUS-MT configs set with bad_words_ids; vaswani never outputs padding)."""
    _, hf_model, tokenizer = hf
    ids, mask = hf_batch(tokenizer, texts)
    pad = hf_model.config.pad_token_id
    out = hf_model.generate(
        input_ids=ids, attention_mask=mask, do_sample=False, bad_words_ids=[[pad]], **settings
    )
    return ids, out


def generated(row: list[int], eos: int, pad: int) -> list[int]:
    """The tokens of a `generate` row after the start token, up to end-of-sentence or padding."""
    out = []
    for token in row[1:]:
        if token in (eos, pad):
            break
        out.append(token)
    return out


def test_the_config_switches_say_what_marian_computes(imported):
    cfg = imported[1][0].cfg
    assert (cfg.sinusoid_layout, cfg.activation, cfg.output_bias) == ("halves", "silu", True)
    assert (cfg.norm, cfg.tie_embeddings, cfg.scale_embeddings) == ("post", "all", True)
    assert cfg.bos_id == cfg.pad_id and cfg.eos_id == 0


def test_logits_equal_hugging_face(hf, imported):
    _, hf_model, tokenizer = hf
    model = imported[1][0]
    ids, mask = hf_batch(tokenizer, INPUTS)  # mixed lengths: padding on the right
    assert torch.equal(ids.ne(model.cfg.pad_id), mask.bool())
    torch.manual_seed(1)
    tgt = torch.randint(2, model.cfg.vocab_size - 2, (ids.size(0), 9))
    tgt[:, 0] = model.cfg.bos_id
    with torch.no_grad():
        theirs = hf_model(input_ids=ids, attention_mask=mask, decoder_input_ids=tgt).logits
        ours = model(ids, tgt)
    assert ours.shape == theirs.shape
    torch.testing.assert_close(ours, theirs, atol=1e-4, rtol=0)


def test_the_tokenizer_equals_marians(hf, imported):
    tokenizer = hf[2]
    _, src_tok, tgt_tok, _ = imported[1]
    for text in INPUTS:
        assert src_tok.encode(text) + [src_tok.eos_id] == tokenizer(text).input_ids, text
    assert src_tok.unk_id in src_tok.encode("Zürich")  # "Z" is in no piece
    for text in ENGLISH:
        ids = tokenizer(text_target=text).input_ids
        assert tgt_tok.encode(text) + [tgt_tok.eos_id] == ids
        assert tgt_tok.decode(ids) == tokenizer.decode(ids, skip_special_tokens=True) == text


def test_greedy_equals_generate(hf, imported):
    model = imported[1][0]
    cfg = model.cfg
    ids, theirs = hf_generate(hf, INPUTS, num_beams=1, max_new_tokens=30)
    ours = greedy(model, ids, DecodeConfig(beam_size=1, max_new_tokens=30))
    expected = [generated(row, cfg.eos_id, cfg.pad_id) for row in theirs.tolist()]
    assert [h.tokens for h in ours] == expected
    assert sum(h.finished for h in ours) >= len(GERMAN)  # real ends, not just the length limit


def test_beam_4_equals_generate(hf, imported):
    model = imported[1][0]
    cfg = model.cfg
    ids, theirs = hf_generate(
        hf,
        INPUTS,
        num_beams=4,
        max_new_tokens=30,
        length_penalty=0.6,  # Hugging Face's definition: log P / length^0.6, EOS counted
        early_stopping=False,
        output_scores=True,
        return_dict_in_generate=True,
    )
    dc = DecodeConfig(beam_size=4, alpha=0.6, length_penalty="plain", max_new_tokens=30)
    ours = [hypotheses[0] for hypotheses in beam_search(model, ids, dc)]
    expected = [generated(row, cfg.eos_id, cfg.pad_id) for row in theirs.sequences.tolist()]
    assert [h.tokens for h in ours] == expected
    torch.testing.assert_close(
        torch.tensor([h.score for h in ours]), theirs.sequences_scores, atol=1e-4, rtol=0
    )


def test_translate_evaluate_plot_and_serve_use_the_imported_directory(
    hf, imported, tmp_path, capsys
):
    run, (model, src_tok, tgt_tok, _) = imported
    _, theirs = hf_generate(hf, GERMAN, num_beams=4, max_new_tokens=40)
    expected = hf[2].batch_decode(theirs, skip_special_tokens=True)
    assert (
        sum(e == r for e, r in zip(expected, ENGLISH, strict=True)) >= 4
    )  # the toy model learned its data

    # generate's default length penalty: log P / length^1.0
    dc = DecodeConfig(beam_size=4, alpha=1.0, length_penalty="plain", max_new_tokens=40)
    assert translate(TextModel(model, src_tok, tgt_tok), GERMAN, dc) == expected

    source, reference = tmp_path / "de.txt", tmp_path / "en.txt"
    source.write_text("\n".join(GERMAN) + "\n")
    reference.write_text("\n".join(ENGLISH) + "\n")
    capsys.readouterr()
    assert main(["translate", "--checkpoint", str(run), "--precision", "fp32", *GERMAN[:2]]) == 0
    assert capsys.readouterr().out.splitlines() == ENGLISH[:2]
    args = ["evaluate", "--checkpoint", str(run), "--src", str(source), "--ref", str(reference)]
    assert main(args) == 0
    assert "BLEU" in capsys.readouterr().out
    assert main(["evaluate", "--checkpoint", str(run)]) == 2  # no training data to take a split of
    assert "--src FILE --ref FILE" in capsys.readouterr().err

    figures = attention(TextModel(model, src_tok, tgt_tok), GERMAN[1], tmp_path / "att.png")
    assert len(figures) == 3
    assert all((tmp_path / f"att-{kind}.png").stat().st_size > 0 for kind in figures)

    server = Server(create_app(Engine(model, src_tok, tgt_tok), ServeSettings(precision="fp32")))
    try:
        status, body = server.request("POST", "/translate", {"texts": GERMAN[:3]})
    finally:
        server.stop()
    assert status == 200
    assert body["translations"] == translate(TextModel(model, src_tok, tgt_tok), GERMAN[:3])


def test_the_cli_imports_and_refuses_a_used_directory(hf, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(["import-marian", str(hf[0]), "--out", str(out)]) == 0
    assert "activation silu" in capsys.readouterr().out
    assert main(["import-marian", str(hf[0]), "--out", str(out)]) == 2
    assert "not empty" in capsys.readouterr().err


def edited_copy(hf_dir, tmp_path, **fields):
    copy = tmp_path / "edited"
    shutil.copytree(hf_dir, copy)
    config = json.loads((copy / "config.json").read_text())
    config.update(fields)
    (copy / "config.json").write_text(json.dumps(config))
    return copy


@pytest.mark.parametrize(
    "fields, named",
    [
        ({"activation_function": "gelu_new"}, "activation_function='gelu_new'"),
        ({"normalize_before": True}, "normalize_before=True"),
        ({"normalize_embedding": True}, "normalize_embedding=True"),
        ({"static_position_embeddings": False}, "static_position_embeddings=False"),
        ({"model_type": "bart"}, "model_type='bart'"),
        ({"decoder_ffn_dim": 128}, "decoder_ffn_dim=128"),
        ({"decoder_start_token_id": 0}, "decoder_start_token_id=0"),
        ({"share_encoder_decoder_embeddings": True, "tie_word_embeddings": False}, "tie_word"),
    ],
)
def test_what_vaswani_cannot_represent_is_refused_by_name(hf, tmp_path, fields, named):
    with pytest.raises(MarianImportError, match=named.replace("(", r"\(")):
        import_marian(edited_copy(hf[0], tmp_path, **fields), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_tensors_without_a_place_and_missing_files_are_refused(hf, tmp_path):
    copy = edited_copy(hf[0], tmp_path)
    from safetensors.torch import load_file, save_file

    tensors = load_file(str(copy / "model.safetensors"))
    tensors["model.encoder.layernorm_embedding.weight"] = torch.ones(32)
    save_file(tensors, str(copy / "model.safetensors"))
    with pytest.raises(MarianImportError, match="layernorm_embedding"):
        import_marian(copy, tmp_path / "run1")
    (copy / "target.spm").unlink()
    with pytest.raises(MarianImportError, match="no target.spm"):
        import_marian(copy, tmp_path / "run2")


class Payload:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (open, (str(self.marker), "w"))


def test_pickled_weights_load_as_tensors_only(hf, imported, tmp_path):
    copy = edited_copy(hf[0], tmp_path)
    (copy / "model.safetensors").unlink()
    torch.save(hf[1].state_dict(), copy / "pytorch_model.bin")  # the older format
    import_marian(copy, tmp_path / "run")
    model = load_trained(tmp_path / "run")[0]
    ids = torch.tensor([[5, 6, 7, 0]])
    tgt = torch.tensor([[model.cfg.bos_id, 9, 10]])
    with torch.no_grad():
        torch.testing.assert_close(model(ids, tgt), imported[1][0](ids, tgt))

    marker = tmp_path / "pwned"
    (copy / "pytorch_model.bin").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(CheckpointError, match="unsafe"):
        import_marian(copy, tmp_path / "run-bad")
    assert not marker.exists()


SUBJECTS = [("der Hund", "the dog"), ("die Katze", "the cat"), ("das Kind", "the child")]
SUBJECTS += [("er", "he"), ("sie", "she")]
OBJECTS = [("Milch", "milk"), ("Tee", "tea"), ("Wasser", "water"), ("Saft", "juice")]
OBJECTS += [("Kaffee", "coffee"), ("Brot", "bread")]


def test_fine_tuning_an_imported_model(imported, tmp_path, capsys):
    """prepare --tokenizer-from and train --init: the imported model learns new pairs."""
    from vaswani.config import TrainConfig
    from vaswani.data import PreparedData
    from vaswani.train.loop import evaluate
    from vaswani.train.recipe import resolved

    run = imported[0]
    corpus = tmp_path / "pairs.tsv"
    pairs = [
        f"{s_de} {verb_de} {o_de}\t{s_en} {verb_en} {o_en}"
        for s_de, s_en in SUBJECTS
        for o_de, o_en in OBJECTS
        for verb_de, verb_en in (("trinkt", "drinks"), ("mag", "likes"))
    ]
    corpus.write_text("\n".join(pairs) + "\n")
    data = tmp_path / "data"
    args = ["prepare", str(corpus), "--out", str(data), "--valid-fraction", "0.2"]
    assert main([*args, "--test-fraction", "0.1", "--tokenizer-from", str(run)]) == 0
    prepared = PreparedData(data)
    assert prepared.meta["tokenizer"]["kind"] == "marian"
    assert prepared.src_tokenizer.encode("der Hund") == imported[1][1].encode("der Hund")

    tc = TrainConfig(data=str(data), out=str(tmp_path / "tuned"), init=str(run), max_steps=40)
    tc = resolved(
        dataclasses.replace(
            tc,
            warmup=10,
            lr_scale=0.5,
            batch_tokens=512,
            eval_every=40,
            save_every=40,
            precision="fp32",
        )
    )
    before = evaluate(imported[1][0], prepared, tc, torch.device("cpu"))["valid_loss"]
    args = ["train", "--data", str(data), "--out", tc.out, "--init", str(run), "--max-steps", "40"]
    args += ["--warmup", "10", "--lr-scale", "0.5", "--batch-tokens", "512", "--eval-every", "40"]
    assert main([*args, "--save-every", "40", "--precision", "fp32"]) == 0
    records = [json.loads(line) for line in (tmp_path / "tuned" / "metrics.jsonl").open()]
    after = [r["valid_loss"] for r in records if "valid_loss" in r][-1]
    assert after < 0.5 * before

    model, src_tok, tgt_tok, _ = load_trained(tmp_path / "tuned")
    assert model.cfg == dataclasses.replace(imported[1][0].cfg)  # same architecture, new weights
    assert translate(TextModel(model, src_tok, tgt_tok), ["der Hund trinkt Milch"]) != [""]


def test_fine_tuning_refuses_data_with_another_tokenizer(imported, numbers_data, tmp_path):
    from vaswani.config import TrainConfig
    from vaswani.train.loop import TrainingError, train

    run = str(imported[0])
    tc = TrainConfig(data=str(numbers_data), out=str(tmp_path / "t"), init=run, max_steps=1)
    with pytest.raises(TrainingError, match="tokenizer_from="):
        train(tc, progress=False)


def test_a_multilingual_model_translates_into_each_language_as_generate_does(tmp_path, capsys):
    directory = tmp_path / "opus-mt-toy-mul"
    codes = (">>deu<<", ">>fra<<", ">>por_Latn<<")
    model = build_marian(directory, steps=40, codes=codes)
    tokenizer = MarianTokenizer(
        str(directory / "source.spm"), str(directory / "target.spm"), str(directory / "vocab.json")
    )
    status = main(
        ["import-marian", str(directory), "--out", str(tmp_path / "run"), "--source-lang", "de"]
    )
    assert status == 0 and "translates into deu, fra, por_latn" in capsys.readouterr().out
    run = load_run(tmp_path / "run")
    assert run.languages.pairs == [("de", "deu"), ("de", "fra"), ("de", "por_latn")]
    texts = [*GERMAN[:4], "Zürich ist schön!"]
    for code in codes:
        target = code[2:-2]
        ids, theirs = hf_generate(
            (directory, model, tokenizer),
            [f"{code} {t}" for t in texts],
            num_beams=4,
            max_new_tokens=20,
            length_penalty=0.6,
            early_stopping=False,
        )
        expected = [tokenizer.decode(row, skip_special_tokens=True) for row in theirs.tolist()]
        dc = DecodeConfig(beam_size=4, alpha=0.6, length_penalty="plain", max_new_tokens=20)
        assert run.translate(texts, Request(target=target.upper(), decoding=dc)) == expected, code
        # the token typed by the user, as OPUS-MT users do, is not doubled by --target
        assert (
            run.translate([f"{code} {texts[0]}"], Request(target=target, decoding=dc))
            == expected[:1]
        )
    with pytest.raises(RunError, match="translates into deu, fra, por_latn: give the target"):
        run.translate(texts)
    assert (
        main(
            ["export", str(tmp_path / "run"), "--to", "huggingface", "--out", str(tmp_path / "hf")]
        )
        == 0
    )
    exported = json.loads((tmp_path / "hf" / "vocab.json").read_text())
    assert all(code in exported for code in codes)


def test_an_imported_model_teaches_a_dataset_with_its_own_tokenizer(imported, tmp_path):
    """`vaswani distill` with an OPUS-MT-shaped teacher: the dataset's sources are translated as
    text and the translations encoded with the dataset's own BPE."""
    from vaswani.config import DecodeConfig
    from vaswani.data import PreparedData, PrepareOptions
    from vaswani.distill import distill
    from vaswani.prepare import prepare
    from vaswani.translation.engine import load_run

    corpus = tmp_path / "pairs.tsv"
    pairs = [
        f"{s_de} sieht {o_de}\t{s_en} sees {o_en}"
        for s_de, s_en in SUBJECTS
        for o_de, o_en in OBJECTS
    ]
    corpus.write_text("\n".join(pairs) + "\n")
    data = tmp_path / "data"
    prepare([str(corpus)], data, PrepareOptions(vocab_size=300, progress=False, valid_fraction=0.1))
    teacher = load_run(imported[0])
    done = distill([teacher], data, tmp_path / "kd", DecodeConfig(beam_size=2))
    old, new = PreparedData(data), PreparedData(tmp_path / "kd")
    assert new.meta["tokenizer"] == old.meta["tokenizer"] and done.replaced > 0
    train = new.split("train")
    sources = [old.src_tokenizer.decode(train.pair(i)[0].tolist()) for i in range(3)]
    expected = teacher.translate(sources, Request(decoding=DecodeConfig(beam_size=2), split=False))
    assert [new.tgt_tokenizer.decode(train.pair(i)[1].tolist()) for i in range(3)] == expected
