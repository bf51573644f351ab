"""The lexical shortlist: how it is built, what decoding with it may output, and the commands."""

import shutil

import numpy as np
import pytest
import torch
from test_decode import make_model, pad_sources, sentences

from helpers import cli
from vaswani.config import DecodeConfig
from vaswani.decoding.search import beam_search, decode, greedy
from vaswani.decoding.shortlist import Shortlist, ShortlistError, build_shortlist, coverage


def pairs_with_a_dictionary(n: int = 300, seed: int = 0):
    """Source tokens 10..19 translate to target token s + 100; target 7 is in every sentence."""
    rng = np.random.default_rng(seed)
    for _ in range(n):
        src = rng.choice(np.arange(10, 20), size=3, replace=False)
        yield src, np.concatenate([src + 100, [7]])


def test_each_source_token_lists_its_translation_first_and_every_list_holds_the_frequent():
    shortlist = build_shortlist(
        pairs_with_a_dictionary(), (30, 130), always=[2], frequent=1, per_token=3, never=[0]
    )
    assert shortlist.frequent.tolist() == [2, 7]  # the most frequent, and end-of-sentence
    for s in range(10, 20):
        assert shortlist.per_token[s, 0] == s + 100
    assert (shortlist.per_token[:10] == -1).all()  # tokens never seen list nothing
    tokens, allowed = shortlist.allowed(torch.tensor([[10, 11, 0], [12, 0, 0]]))
    lists = [set(tokens[row].tolist()) for row in allowed]
    assert {2, 7, 110, 111}.issubset(lists[0]) and {2, 7, 112}.issubset(lists[1])
    assert 112 not in lists[0] and 110 not in lists[1]  # each sentence keeps its own list
    assert set(tokens.tolist()) == lists[0] | lists[1]
    assert torch.equal(tokens, tokens.sort().values)
    assert coverage(shortlist, pairs_with_a_dictionary(20, seed=1)).held == 1.0
    one = coverage(shortlist, [(np.array([10]), np.array([110, 7, 9]))])
    assert one.held == pytest.approx(2 / 3)  # 9 is on no list
    assert one.list_size == len({2, 7} | set(shortlist.per_token[10].tolist()) - {-1})


def test_padding_is_never_listed_even_when_frequent():
    pairs = [(np.array([5]), np.array([0, 3]))] * 4
    shortlist = build_shortlist(pairs, (8, 8), always=[2], frequent=5, per_token=4, never=[0])
    assert 0 not in shortlist.frequent.tolist() and 0 not in shortlist.per_token.tolist()


def full_shortlist(model) -> Shortlist:
    cfg = model.cfg
    listed = torch.tensor([t for t in range(cfg.target_vocab_size) if t != cfg.pad_id])
    return Shortlist(listed, torch.full((cfg.vocab_size, 1), -1))


@pytest.mark.parametrize("beam_size", [1, 3])
def test_a_shortlist_of_every_token_decodes_as_the_full_vocabulary(beam_size):
    model = make_model()
    src = pad_sources(model.cfg, sentences(model.cfg, 8))
    dc = DecodeConfig(beam_size=beam_size, n_best=beam_size)
    full = decode(model, src, dc)
    short = decode(model, src, dc, shortlist=full_shortlist(model))
    assert [[h.tokens for h in hs] for hs in short] == [[h.tokens for h in hs] for hs in full]
    for hs, gs in zip(short, full, strict=True):
        for h, g in zip(hs, gs, strict=True):
            assert h.log_prob == pytest.approx(g.log_prob, abs=1e-4)


def random_shortlist(model, seed: int = 0) -> Shortlist:
    """Each source token lists 4 random target tokens; end-of-sentence and 3 others always."""
    cfg = model.cfg
    generator = torch.Generator().manual_seed(seed)
    per_token = torch.randint(4, cfg.target_vocab_size, (cfg.vocab_size, 4), generator=generator)
    per_token[cfg.pad_id] = -1
    return Shortlist(torch.tensor([cfg.eos_id, 4, 5, 6]), per_token)


@pytest.mark.parametrize("search", [greedy, beam_search])
def test_with_a_shortlist_a_sentence_outputs_only_its_own_list_and_ignores_its_batch(search):
    model = make_model(seed=3)
    cfg = model.cfg
    shortlist = random_shortlist(model)
    src = pad_sources(cfg, sentences(cfg, 6))
    together = search(model, src, shortlist=shortlist)
    for row in range(src.size(0)):
        alone_src = src[row : row + 1, : int((src[row] != cfg.pad_id).sum())]
        alone = search(model, alone_src, shortlist=shortlist)[0]
        with_batch = together[row]
        if search is beam_search:
            alone, with_batch = alone[0], with_batch[0]
        assert alone.tokens == with_batch.tokens
        assert alone.log_prob == pytest.approx(with_batch.log_prob, abs=1e-4)
        tokens, allowed = shortlist.allowed(alone_src)
        assert set(alone.tokens) <= set(tokens[allowed[0]].tolist())


def test_a_saved_shortlist_loads_and_one_for_another_vocabulary_is_refused(tmp_path):
    shortlist = build_shortlist(pairs_with_a_dictionary(), (30, 130), always=[2])
    path = tmp_path / "shortlist.safetensors"
    shortlist.save(path, {"pairs": "300"})
    loaded = Shortlist.load(path, 30, 130)
    assert torch.equal(loaded.per_token, shortlist.per_token)
    with pytest.raises(ShortlistError, match="another vocabulary"):
        Shortlist.load(path, 31, 130)
    with pytest.raises(ShortlistError, match="another vocabulary"):
        Shortlist.load(path, 30, 100)  # lists target ids the model does not have
    path.write_bytes(b"not a safetensors file")
    with pytest.raises(ShortlistError, match="not a shortlist"):
        Shortlist.load(path, 30, 130)


def test_shortlist_command_then_translate_and_evaluate_with_it(numbers_run, capsys, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(numbers_run, run)
    code, _, err = cli(capsys, "translate", "--checkpoint", str(run), "--shortlist", "dreizehn")
    assert code == 2 and "vaswani shortlist" in err  # not built yet: says how to build it

    code, out, _ = cli(capsys, "shortlist", str(run), "--frequent", "20", "--per-token", "10")
    assert code == 0 and (run / "shortlist.safetensors").is_file()
    held = float(out.split("the lists hold ")[1].split("%")[0])
    assert held > 95.0, out

    figures = {}
    for extra in ([], ["--shortlist"]):
        code, out, _ = cli(capsys, "evaluate", "--checkpoint", str(run), "--split", "valid", *extra)
        assert code == 0
        figures[bool(extra)] = float(out.split("chrF = ")[1].split()[0])
    assert figures[True] >= figures[False] - 1.0, figures

    code, out, _ = cli(capsys, "translate", "--checkpoint", str(run), "--shortlist", "dreizehn")
    assert code == 0 and out.strip()


def test_a_damaged_shortlist_file_is_one_line_error(numbers_run, capsys, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(numbers_run, run)
    (run / "shortlist.safetensors").write_bytes(b"\x00" * 40)
    code, _, err = cli(capsys, "translate", "--checkpoint", str(run), "--shortlist", "eins")
    assert code == 2 and "not a shortlist" in err and "Traceback" not in err
    (run / "shortlist.safetensors").unlink()
    (run / "shortlist.safetensors").symlink_to("/etc/passwd")
    code, _, err = cli(capsys, "translate", "--checkpoint", str(run), "--shortlist", "eins")
    assert code == 2 and "outside" in err


def test_the_server_translates_over_its_shortlist(numbers_run):
    from helpers import Server
    from vaswani.decoding.text import TextModel, translate
    from vaswani.serve import ServeSettings, create_app
    from vaswani.translation.engine import Engine, load_run

    loaded = load_run(numbers_run)
    cfg = loaded.config
    narrow = Shortlist(torch.tensor([cfg.eos_id, 10, 11, 12]), torch.full((cfg.vocab_size, 1), -1))
    texts = ["271493", "42"]
    tokenizers = (loaded.src_tokenizer, loaded.tgt_tokenizer)
    narrowed = Engine(loaded.model, *tokenizers, shortlist=narrow)
    expected = translate(narrowed, texts, DecodeConfig())
    assert expected != translate(TextModel(loaded.model, *tokenizers), texts, DecodeConfig())
    server = Server(create_app(narrowed, ServeSettings(precision="fp32")))
    try:
        status, body = server.request("POST", "/translate", {"texts": texts})
    finally:
        server.stop()
    # an empty translation is never answered: the source is, marked unsafe ("empty")
    kept = [found or text for found, text in zip(expected, texts, strict=True)]
    assert status == 200 and body["translations"] == kept
    assert body.get("unsafe") == (
        None if kept == expected else [None if f else "empty" for f in expected]
    )
