"""Import Hugging Face's multilingual translation models: M2M-100, NLLB-200 and mBART-50.

NLLB-200 and M2M-100 are one architecture (`M2M100ForConditionalGeneration`), mBART-50 a second
(`MBartForConditionalGeneration`); both are the paper's encoder-decoder with switches `ModelConfig`
has:
- pre-norm layers with a final LayerNorm after each stack (`norm="pre"`);
- embeddings scaled by sqrt(d_model) where the config says `scale_embedding`;
- positions from row 2 of their table (`position_offset=2`): fairseq's sinusoids laid out as sines
  then cosines (`sinusoid_layout="fairseq"`) for M2M-100, learned positions for mBART, which also
  normalises the embeddings (`embedding_norm`) and adds a bias to the logits (`output_bias`);
- decoding starts from end-of-sentence (`bos_id = eos_id = 2`) and the target language's token is
  forced as the first token (`vaswani.languages.Languages.forced`), the source's put before the
  source text.
Anything else a config can say is refused, naming the field. The weights are laid out as
Marian's (`vaswani.marian.convert_weights`); the tokenizer is the model's own
(`vaswani.data.hub_tokenizer`).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

from torch import nn

from vaswani import checkpoint as ckpt
from vaswani.config import ModelConfig
from vaswani.data.hub_tokenizer import M2M_CODE_LISTS, MBART50_CODES, JsonTokenizer
from vaswani.languages import Languages, hub_languages
from vaswani.marian import (
    ACTIVATIONS,
    MarianImportError,
    bart_config,
    bart_fields,
    check_shared,
    load_marian_model,
    refuse,
    split_tensors,
)
from vaswani.safe_io import read_json

FAMILIES = {"m2m_100": "M2M100ForConditionalGeneration", "mbart": "MBartForConditionalGeneration"}
# Kept from the Hugging Face folder, beside the tokenizer, for `vaswani export --to huggingface`.
KEPT = ("tokenizer_config.json", "special_tokens_map.json", "generation_config.json")
# The imported config.json, kept for export: the ids and settings vaswani has no use for.
HF_CONFIG = "hf_config.json"
JSON_TOKENIZER, SPM, VOCAB = "tokenizer.json", "sentencepiece.bpe.model", "vocab.json"
# The language tokens of each family's tokenizer.json: NLLB's "spa_Latn", mBART-50's "es_XX".
LANGUAGE_TOKEN = re.compile(r"^([a-z]{3}_[A-Z][a-z]{3}|[a-z]{2}_[A-Z]{2})$")
POSITION_OFFSET = 2  # fairseq keeps rows 0 and 1 of the position table for padding


def model_config(hf: dict[str, Any]) -> ModelConfig:
    """The `ModelConfig` computing what the M2M-100 or mBART model of config `hf` computes."""
    family = hf.get("model_type")
    if family not in FAMILIES:
        raise refuse(hf, "model_type", f"import-hf reads marian, {', '.join(FAMILIES)}")
    check_shared(hf)
    mbart = family == "mbart"
    return bart_config(  # the families' own defaults where a config leaves one out
        {"activation_function": "gelu" if mbart else "relu", **hf},
        {
            "positions": "learned" if mbart else "sinusoidal",
            "sinusoid_layout": "fairseq",
            "position_offset": POSITION_OFFSET,
            "embedding_norm": mbart,
            "norm": "pre",
            "output_bias": mbart,
        },
    )


def tokenizer_files(hf_dir: Path, family: str) -> dict[str, Any]:
    """The tokenizer record for data.json: tokenizer.json (NLLB, mBART-50) where there is one,
    else M2M-100's SentencePiece model, vocabulary and code list, or mBART-50's SentencePiece
    model and code list."""
    settings = {}
    if (hf_dir / "tokenizer_config.json").is_file():
        settings = read_json(hf_dir / "tokenizer_config.json", "tokenizer config", dict)
    if settings.get("legacy_behaviour"):
        raise MarianImportError(
            "tokenizer_config.json: legacy_behaviour=true puts the language code after the "
            "sentence; vaswani reads the current layout (code first)"
        )
    if (hf_dir / JSON_TOKENIZER).is_file():
        return {"kind": "hub", "files": {"src": JSON_TOKENIZER, "tgt": JSON_TOKENIZER}}
    if family == "mbart" and (hf_dir / SPM).is_file():
        listed = settings.get("additional_special_tokens") or MBART50_CODES
        codes = [c for c in listed if isinstance(c, str) and LANGUAGE_TOKEN.match(c)]
        return {"kind": "mbart", "files": {"src": SPM, "tgt": SPM}, "codes": codes}
    if not (hf_dir / SPM).is_file() or not (hf_dir / VOCAB).is_file():
        raise MarianImportError(
            f"{hf_dir}: no {JSON_TOKENIZER}, nor {SPM} and {VOCAB} (the tokenizer files are needed)"
        )
    listed = settings.get("language_codes", "m2m100")
    if listed not in M2M_CODE_LISTS:
        raise refuse(settings, "language_codes", f"known lists: {', '.join(M2M_CODE_LISTS)}")
    files = {"src": SPM, "tgt": SPM, "vocab": VOCAB}
    return {"kind": "m2m", "files": files, "codes": M2M_CODE_LISTS[listed]}


def language_tokens(tokenizer: Any) -> list[str]:
    """The model's language tokens, in id order: a tokenizer.json's added tokens spelt as
    language codes, or a SentencePiece tokenizer's list (`FairseqTokenizer.languages`)."""
    if isinstance(tokenizer, JsonTokenizer):
        added = tokenizer.tokenizer.get_added_tokens_decoder()
        return [t.content for _, t in sorted(added.items()) if LANGUAGE_TOKEN.match(t.content)]
    return tokenizer.languages


def import_hub(hf_dir: Path, out: Path, hf_config: dict[str, Any]) -> Path:
    """Write a vaswani run directory at `out` from the Hugging Face M2M-100, NLLB-200 or mBART
    directory `hf_dir` (its config.json read as `hf_config`): config.json, data.json (the
    import, the tokenizer and every language the model has, each a source and a target), the
    tokenizer's files and best/ weights. The tokenizer is checked before the weights are read."""
    from vaswani.data.tokenizer import load_tokenizers
    from vaswani.run import BEST, CONFIG, DATA_INFO

    cfg = model_config(hf_config)
    tokenizer_meta = tokenizer_files(hf_dir, hf_config["model_type"])
    tokenizer_meta["ids"] = cfg.vocab_size
    try:
        tokenizer, _ = load_tokenizers(hf_dir, tokenizer_meta)
    except ValueError as error:
        raise MarianImportError(f"{hf_dir}: unusable tokenizer files: {error}") from None
    if tokenizer.vocab_size != cfg.vocab_size:
        raise MarianImportError(
            f"{hf_dir}: the tokenizer has {tokenizer.vocab_size} ids, more than the model's "
            f"{cfg.vocab_size}; they are not one model's"
        )
    found = language_tokens(tokenizer)
    if len(found) < 2:
        raise MarianImportError(f"{hf_dir}: the tokenizer names fewer than two language codes")
    model = load_marian_model(hf_dir, cfg)
    out.mkdir(parents=True, exist_ok=True)
    for name in set(tokenizer_meta["files"].values()) | {n for n in KEPT if (hf_dir / n).is_file()}:
        shutil.copyfile(hf_dir / name, out / name)
    shutil.copyfile(hf_dir / "config.json", out / HF_CONFIG)
    languages = Languages.among(hub_languages(found))
    info = {
        "path": None,
        "imported_from": {"format": hf_config["model_type"], "path": str(hf_dir.resolve())},
        "meta": {"tokenizer": tokenizer_meta, "languages": languages.record()},
    }
    (out / CONFIG).write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    (out / DATA_INFO).write_text(json.dumps(info, indent=2) + "\n")
    ckpt.write_checkpoint(out, BEST, {ckpt.WEIGHTS: lambda p: ckpt.save_weights(model, p)})
    return out


def import_hf(hf_dir: Path, out: Path, source: str = "mul") -> Path:
    """Write a vaswani run directory at `out` from the Hugging Face translation model in `hf_dir`,
    by its config's model_type: Marian / OPUS-MT (`vaswani.marian`, whose multilingual models
    are named from `source`), M2M-100 and NLLB-200, or mBART-50 (this module)."""
    from vaswani.marian import import_marian

    hf_dir, out = Path(hf_dir), Path(out)
    if not (hf_dir / "config.json").is_file():
        raise MarianImportError(f"{hf_dir}: no config.json; give a Hugging Face model directory")
    hf_config = read_json(hf_dir / "config.json", "model config", dict)
    family = hf_config.get("model_type")
    if family == "marian":
        return import_marian(hf_dir, out, source)
    if out.exists() and any(out.iterdir()):
        raise MarianImportError(f"{out}: exists and is not empty; choose a new directory")
    if family not in FAMILIES:
        raise MarianImportError(
            f"config.json: model_type={family!r}: vaswani imports marian, m2m_100 (M2M-100, "
            "NLLB-200) and mbart (mBART-50)"
        )
    return import_hub(hf_dir, out, hf_config)


def family_of(cfg: ModelConfig) -> str | None:
    """The Hugging Face family whose architecture computes what `cfg` does: "m2m_100", "mbart",
    or None (Marian's, or none)."""
    if cfg.norm != "pre" or cfg.position_offset != POSITION_OFFSET or cfg.tie_embeddings != "all":
        return None
    if cfg.positions == "learned" and cfg.embedding_norm and cfg.output_bias:
        return "mbart"
    if cfg.sinusoid_layout == "fairseq" and not cfg.embedding_norm and not cfg.output_bias:
        return "m2m_100"
    return None


def hub_config(cfg: ModelConfig, family: str, imported: dict[str, Any]) -> dict[str, Any]:
    """config.json of the `family` model computing what `cfg` does; the `imported` config's
    other settings (token ids, generation defaults) kept."""
    activations = {ours: theirs for theirs, ours in ACTIVATIONS.items() if theirs != "swish"}
    return {
        **imported,
        "architectures": [FAMILIES[family]],
        "model_type": family,
        **bart_fields(cfg),
        "activation_function": activations[cfg.activation],
        "tie_word_embeddings": True,
    }


def hub_tensors(model: nn.Module) -> dict[str, Any]:
    """The checkpoint tensors of an M2M-100 or mBART model from a vaswani `Transformer` of
    `family_of` its config (the tied embedding written under each of its names)."""
    cfg = model.cfg
    state = {name: t.detach().float().cpu() for name, t in model.state_dict().items()}
    tensors = split_tensors(state, cfg)
    shared = tensors["model.decoder.embed_tokens.weight"]
    for name in ("model.shared.weight", "model.encoder.embed_tokens.weight", "lm_head.weight"):
        tensors[name] = shared.clone()
    if cfg.output_bias:
        tensors["final_logits_bias"] = tensors["final_logits_bias"].reshape(1, -1)
    return tensors
