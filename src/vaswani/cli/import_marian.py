"""Convert a MarianMTModel directory on disk (config.json, model.safetensors or pytorch_model.bin,
source.spm, target.spm, vocab.json) into a vaswani run directory that translate, evaluate, serve
and plot accept. Nothing is downloaded, and nothing in the checkpoint is executed. A model vaswani
cannot compute exactly is refused, with the field that stands in the way. A multilingual OPUS-MT
model (two or more >>xxx<< tokens in its vocabulary) keeps its languages: translate it with
--target xxx, or start a text with its token as OPUS-MT users do."""

from __future__ import annotations

import argparse
from pathlib import Path

from vaswani.cli.common import CliError
from vaswani.config import ModelConfig
from vaswani.run import CONFIG
from vaswani.safe_io import read_json
from vaswani.translation.engine import load_run

HELP = "turn a Hugging Face Marian / OPUS-MT model into a run directory"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("hf_dir", type=Path, metavar="HF_DIR", help="the Hugging Face model folder")
    parser.add_argument(
        "--out", type=Path, required=True, help="new run directory (must not exist or be empty)"
    )
    parser.add_argument(
        "--source-lang",
        default="mul",
        metavar="LANG",
        help="a multilingual model's source language, for naming its pairs when served "
        "(default: mul, many)",
    )


def run(args: argparse.Namespace) -> int:
    from vaswani.marian import MarianImportError, import_marian

    try:
        run_dir = import_marian(args.hf_dir, args.out, args.source_lang)
    except MarianImportError as error:
        raise CliError(str(error)) from None
    cfg = ModelConfig.from_dict(read_json(run_dir / CONFIG, "model settings", dict))
    print(
        f"imported {args.hf_dir} into {run_dir}: {cfg.n_encoder_layers}+{cfg.n_decoder_layers} "
        f"layers, d_model {cfg.d_model}, {cfg.n_heads} heads, vocabulary {cfg.vocab_size}, "
        f"activation {cfg.activation}"
    )
    languages = load_run(run_dir).languages
    target = ""
    if languages is not None:
        print(
            f"multilingual: translates into {', '.join(languages.targets)} "
            f"(tokens {languages.token_of(languages.targets[0])}, ...)"
        )
        target = f" --target {languages.targets[0]}"
    print(f'try: vaswani translate --checkpoint {run_dir}{target} "..."')
    return 0
