"""Export a translation run for deployment: --to ctranslate2 writes a CTranslate2 model directory
(CTranslate2's own specification API; `pip install 'vaswani[export]'`), optionally quantized
(--quantization int8 ...), with vaswani's tokenizer files in vaswani_tokenizer/; --to huggingface
writes a folder that MarianMTModel.from_pretrained and its tokenizer (MarianTokenizer for an
imported OPUS-MT model, PreTrainedTokenizerFast for vaswani's BPE) load, which `vaswani
import-marian` reads back. What the target cannot represent is refused, naming the setting."""

from __future__ import annotations

import argparse
from pathlib import Path

from vaswani.export import FORMATS, QUANTIZATIONS, export

HELP = "export a translation model to CTranslate2 (int8 ...) or Hugging Face (MarianMTModel, or an imported model's own)"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("run_dir", type=Path, metavar="RUN_DIR")
    parser.add_argument("--to", choices=FORMATS, required=True, help="the target format")
    parser.add_argument("--out", type=Path, required=True, help="new directory to write")
    parser.add_argument(
        "--quantization", choices=QUANTIZATIONS, help="ctranslate2: weight type (default float32)"
    )
    parser.add_argument(
        "--weights",
        choices=("best", "latest", "averaged"),
        default="best",
        help="which of the run's weights",
    )


def run(args: argparse.Namespace) -> int:
    out = export(args.run_dir, args.to, args.out, args.weights, args.quantization)
    print(f"exported {args.run_dir} ({args.weights}) to {args.to}: {out}")
    if args.to == "ctranslate2":
        print(f"try: python -c \"import ctranslate2; ctranslate2.Translator('{out}')\"")
    else:
        print(f"try: MarianMTModel.from_pretrained('{out}')")
    return 0
