"""Convert a Hugging Face translation model directory on disk, as the hub ships it or
save_pretrained writes it, into a vaswani run directory that translate, evaluate, serve, train
--init and export accept: Marian / OPUS-MT (config.json, model.safetensors or pytorch_model.bin,
source.spm, target.spm, vocab.json), M2M-100 and NLLB-200 (tokenizer.json, or
sentencepiece.bpe.model and vocab.json) and mBART-50. Nothing is downloaded, and nothing in the
checkpoint is executed. A model vaswani cannot compute exactly is refused, with the field that
stands in the way.

A multilingual model keeps its languages. NLLB-200, M2M-100 and mBART-50 translate between any
two of theirs: --source-lang es --target fr (ISO 639-1 or 639-3 codes, or the model's own, such
as spa_Latn or es_XX). A multilingual OPUS-MT model (two or more >>xxx<< tokens) is told only its
target: --target xxx, or a text that starts with its token, as OPUS-MT users write."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from vaswani.cli.common import CliError
from vaswani.config import ModelConfig
from vaswani.languages import Languages
from vaswani.run import CONFIG, DATA_INFO
from vaswani.safe_io import read_json

HELP = "turn a Hugging Face Marian, NLLB-200, M2M-100 or mBART-50 model into a run directory"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("hf_dir", type=Path, metavar="HF_DIR", help="the Hugging Face model folder")
    parser.add_argument(
        "--out", type=Path, required=True, help="new run directory (must not exist or be empty)"
    )
    parser.add_argument(
        "--source-lang",
        default="mul",
        metavar="LANG",
        help="a multilingual OPUS-MT model's source language, for naming its pairs when served "
        "(default: mul, many); NLLB-200, M2M-100 and mBART-50 name all their languages",
    )


def run(args: argparse.Namespace) -> int:
    from vaswani.hub import import_hf
    from vaswani.marian import MarianImportError

    started = time.perf_counter()  # a 600M-parameter model takes half a minute
    try:
        run_dir = import_hf(args.hf_dir, args.out, args.source_lang)
    except MarianImportError as error:
        raise CliError(str(error)) from None
    print(f"imported in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    cfg = ModelConfig.from_dict(read_json(run_dir / CONFIG, "model settings", dict))
    print(
        f"imported {args.hf_dir} into {run_dir}: {cfg.n_encoder_layers}+{cfg.n_decoder_layers} "
        f"layers, d_model {cfg.d_model}, {cfg.n_heads} heads, vocabulary {cfg.vocab_size}, "
        f"activation {cfg.activation}"
    )
    # From the record: loading the weights again (2.3 GiB for NLLB-200 600M) only to say them
    languages = Languages.from_meta(read_json(run_dir / DATA_INFO, "run record", dict)["meta"])
    target = ""
    if languages is not None and languages.forced:
        names = languages.targets
        shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        print(f"multilingual: {len(names)} languages, each a source and a target: {shown}")
        source, other = ("en", "fr") if {"en", "fr"} <= set(names) else names[:2]
        target = f" --source-lang {source} --target {other}"
    elif languages is not None:
        print(
            f"multilingual: translates into {', '.join(languages.targets)} "
            f"(tokens {languages.token_of(languages.targets[0])}, ...)"
        )
        target = f" --target {languages.targets[0]}"
    print(f'try: vaswani translate --checkpoint {run_dir}{target} "..."')
    return 0
