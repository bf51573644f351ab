"""Import Hugging Face Marian / OPUS-MT checkpoints as vaswani run directories.

A `MarianMTModel` directory (config.json, model.safetensors or pytorch_model.bin, source.spm,
target.spm, vocab.json) holds the paper's architecture with four differences that `ModelConfig`
has switches for: the sinusoid table is laid out as sines then cosines (`sinusoid_layout="halves"`),
the feed-forward activation is often SiLU ("swish"), the logits get a bias (`output_bias`), and
decoding starts from the pad id (`bos_id = pad_id`). Anything the format can say that vaswani
cannot compute the same way is refused, naming the field, instead of importing a different model.

Weights are read with safetensors, or with `torch.load(weights_only=True)`: nothing in the
checkpoint is executed.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import torch

from vaswani import checkpoint as ckpt
from vaswani.config import ModelConfig
from vaswani.errors import VaswaniError
from vaswani.languages import Languages, code, marian_languages
from vaswani.model import Transformer, sinusoidal_encoding
from vaswani.safe_io import read_json

# Hugging Face activation names -> vaswani's (HF "gelu" is the exact, erf-based GELU).
ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "swish": "silu", "silu": "silu"}

# Fields that MarianMTModel's code ignores but that, set to anything but these values, describe
# another architecture (written by converters from BART / mBART-like models).
ARCHITECTURE_FIELDS = {
    "normalize_before": False,  # layer norm before each sub-layer (pre-norm)
    "normalize_embedding": False,  # layer norm on the embeddings
    "add_final_layer_norm": False,  # a final layer norm after each stack
    "static_position_embeddings": True,  # False: learned positions
    "add_bias_logits": False,
}

FILES = {"src": "source.spm", "tgt": "target.spm", "vocab": "vocab.json"}
TARGET_VOCAB = "target_vocab.json"
# vaswani's own byte-level BPE, as `vaswani export --to huggingface` writes it, and a multilingual
# model's languages (meta.json's "languages" record).
BPE_FILE, BPE_TARGET_FILE = "tokenizer.json", "target_tokenizer.json"
LANGUAGES_FILE = "vaswani_languages.json"


def bpe_tokenizer_meta(hf_dir: Path) -> dict[str, Any]:
    target = BPE_TARGET_FILE if (hf_dir / BPE_TARGET_FILE).is_file() else BPE_FILE
    return {"kind": "bpe", "shared": target == BPE_FILE, "files": {"src": BPE_FILE, "tgt": target}}


class MarianImportError(VaswaniError, ValueError):
    """A Marian checkpoint that vaswani cannot represent exactly, or that is incomplete."""


def refuse(hf: dict[str, Any], field: str, why: str) -> MarianImportError:
    return MarianImportError(f"config.json: {field}={hf.get(field)!r}: {why}")


def check_architecture(hf: dict[str, Any]) -> None:
    """Refuse, naming the field, a Marian config that vaswani does not compute exactly."""
    if hf.get("model_type") != "marian":
        raise refuse(
            hf, "model_type", "only Marian checkpoints (model_type 'marian') can be imported"
        )
    for field, expected in ARCHITECTURE_FIELDS.items():
        if field in hf and hf[field] != expected:
            raise refuse(hf, field, f"vaswani's Marian import needs {json.dumps(expected)}")
    check_shared(hf)
    if hf["decoder_start_token_id"] == hf["eos_token_id"]:
        raise refuse(hf, "decoder_start_token_id", "decoding cannot start from end-of-sentence")


def check_shared(hf: dict[str, Any]) -> None:
    """Refuse, naming the field, what no model of the BART family vaswani imports (Marian,
    M2M-100, mBART) may say: encoder and decoder of different widths, an activation vaswani does
    not compute, token ids missing."""
    for a, b in (
        ("encoder_attention_heads", "decoder_attention_heads"),
        ("encoder_ffn_dim", "decoder_ffn_dim"),
    ):
        if hf.get(a) != hf.get(b):
            raise refuse(hf, b, f"differs from {a}={hf.get(a)!r}; vaswani uses one value for both")
    if hf.get("activation_function", "gelu") not in ACTIVATIONS:
        raise refuse(hf, "activation_function", f"supported: {', '.join(ACTIVATIONS)}")
    for field in ("pad_token_id", "eos_token_id", "decoder_start_token_id"):
        if not isinstance(hf.get(field), int):
            raise refuse(hf, field, "a token id is needed")


def bart_config(hf: dict[str, Any], switches: dict[str, Any]) -> ModelConfig:
    """The `ModelConfig` of the BART-family config `hf` (sizes, dropouts, activation, token ids,
    ties), with the family's `switches` (positions, norm, biases); a MarianImportError for a
    missing field or settings that describe no valid model."""
    try:
        vocab, tgt_vocab, tie = embedding_ties(hf)
        return ModelConfig(
            vocab_size=vocab,
            tgt_vocab_size=None if tgt_vocab == vocab else tgt_vocab,
            d_model=hf["d_model"],
            n_heads=hf["encoder_attention_heads"],
            d_ff=hf["encoder_ffn_dim"],
            n_encoder_layers=hf["encoder_layers"],
            n_decoder_layers=hf["decoder_layers"],
            dropout=hf.get("dropout", 0.1),
            attention_dropout=hf.get("attention_dropout", 0.0),
            activation_dropout=hf.get("activation_dropout", 0.0),
            max_len=hf["max_position_embeddings"],
            activation=ACTIVATIONS[hf.get("activation_function", "gelu")],
            tie_embeddings=tie,
            scale_embeddings=bool(hf.get("scale_embedding", False)),
            layer_norm_eps=1e-5,
            pad_id=hf["pad_token_id"],
            bos_id=hf["decoder_start_token_id"],
            eos_id=hf["eos_token_id"],
            **switches,
        )
    except KeyError as error:
        raise MarianImportError(f"config.json: no {error.args[0]} field") from None
    except ValueError as error:
        raise MarianImportError(f"config.json describes no valid model: {error}") from None


def bart_fields(cfg: ModelConfig) -> dict[str, Any]:
    """The config.json fields of a BART-family model that `bart_config` reads back: sizes,
    dropouts, scaling and token ids (each family adds its architecture, activation and ties)."""
    return {
        "vocab_size": cfg.vocab_size,
        "d_model": cfg.d_model,
        "encoder_layers": cfg.n_encoder_layers,
        "decoder_layers": cfg.n_decoder_layers,
        "encoder_attention_heads": cfg.n_heads,
        "decoder_attention_heads": cfg.n_heads,
        "encoder_ffn_dim": cfg.d_ff,
        "decoder_ffn_dim": cfg.d_ff,
        "max_position_embeddings": cfg.max_len,
        "scale_embedding": cfg.scale_embeddings,
        "dropout": cfg.dropout,
        "attention_dropout": cfg.attention_dropout,
        "activation_dropout": cfg.activation_dropout,
        "pad_token_id": cfg.pad_id,
        "eos_token_id": cfg.eos_id,
        "decoder_start_token_id": cfg.bos_id,
        "is_encoder_decoder": True,
    }


def embedding_ties(hf: dict[str, Any]) -> tuple[int, int, str]:
    """The source and target vocabulary sizes and vaswani's `tie_embeddings` for them."""
    vocab = hf["vocab_size"]
    tgt_vocab = hf.get("decoder_vocab_size") or vocab
    shared = hf.get("share_encoder_decoder_embeddings", True)
    tied_output = hf.get("tie_word_embeddings", True)
    if shared and tgt_vocab != vocab:
        raise refuse(hf, "decoder_vocab_size", "shared embeddings need one vocabulary size")
    if shared and not tied_output:
        raise refuse(
            hf,
            "tie_word_embeddings",
            "shared source/target embeddings with a separate output matrix have no vaswani form",
        )
    return vocab, tgt_vocab, "all" if shared else ("decoder" if tied_output else "none")


def model_config(hf: dict[str, Any]) -> ModelConfig:
    """The `ModelConfig` computing what `MarianMTModel` with config `hf` computes."""
    check_architecture(hf)
    switches = {"positions": "sinusoidal", "sinusoid_layout": "halves", "norm": "post"}
    return bart_config(hf, {**switches, "output_bias": True})


def weight_names(cfg: ModelConfig) -> dict[str, list[str]]:
    """Each vaswani tensor and the Marian tensors it is made of, concatenated along dim 0 (the
    fused query|key|value and key|value projections). Tied tensors appear once."""
    names = {"decoder.embed.token.weight": ["model.decoder.embed_tokens.weight"]}
    if cfg.tie_embeddings != "all":
        names["encoder.embed.token.weight"] = ["model.encoder.embed_tokens.weight"]
    if cfg.tie_embeddings == "none":
        names["output_projection.weight"] = ["lm_head.weight"]
    if cfg.output_bias:
        names["output_projection.bias"] = ["final_logits_bias"]
    for side in ("encoder", "decoder"):
        # The BART family's pre-norm models (M2M-100, NLLB, mBART: `vaswani.hub`).
        stack = {
            "final_norm": "layer_norm" if cfg.norm == "pre" else None,
            "embed.norm": "layernorm_embedding" if cfg.embedding_norm else None,
        }
        for ours, theirs in stack.items():
            for kind in ("weight", "bias") if theirs else ():
                names[f"{side}.{ours}.{kind}"] = [f"model.{side}.{theirs}.{kind}"]
        if cfg.positions == "learned":
            names[f"{side}.embed.learned.weight"] = [f"model.{side}.embed_positions.weight"]
        pairs = {
            "self_attn.qkv_proj": [f"self_attn.{x}_proj" for x in "qkv"],
            "self_attn.out_proj": ["self_attn.out_proj"],
            "self_attn_norm.norm": ["self_attn_layer_norm"],
            "ffn.linear1": ["fc1"],
            "ffn.linear2": ["fc2"],
            "ffn_norm.norm": ["final_layer_norm"],
        }
        if side == "decoder":
            pairs |= {
                "cross_attn.q_proj": ["encoder_attn.q_proj"],
                "cross_attn.kv_proj": ["encoder_attn.k_proj", "encoder_attn.v_proj"],
                "cross_attn.out_proj": ["encoder_attn.out_proj"],
                "cross_attn_norm.norm": ["encoder_attn_layer_norm"],
            }
        for i in range(getattr(cfg, f"n_{side}_layers")):
            ours, theirs = f"{side}.layers.{i}.", f"model.{side}.layers.{i}."
            for kind in ("weight", "bias"):
                for a, bs in pairs.items():
                    names[f"{ours}{a}.{kind}"] = [f"{theirs}{b}.{kind}" for b in bs]
    return names


# Where a tied checkpoint may keep a tensor instead (Hugging Face saves a tied tensor once).
ALIASES = {
    "model.decoder.embed_tokens.weight": ["model.shared.weight"],
    "model.encoder.embed_tokens.weight": ["model.shared.weight"],
    "lm_head.weight": ["model.decoder.embed_tokens.weight", "model.shared.weight"],
}
# Tensors a checkpoint may hold that vaswani computes instead (checked, not loaded).
POSITION_TABLES = tuple(
    f"model.{side}.embed_positions.{name}"
    for side in ("encoder", "decoder")
    for name in ("weight", "weights")  # M2M-100 calls its buffer "weights"
)


def split_tensors(state: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """The Hugging Face tensors of vaswani's `state` by `weight_names(cfg)`: the fused
    projections cut back into their parts (the inverse of `convert_weights`)."""
    tensors = {}
    for ours, theirs in weight_names(cfg).items():
        for name, part in zip(theirs, state[ours].chunk(len(theirs)), strict=True):
            tensors[name] = part.clone().contiguous()
    return tensors


def read_hf_weights(hf_dir: Path) -> dict[str, torch.Tensor]:
    """The tensors of a Hugging Face model directory, read without executing anything."""
    safetensors_file, pickle_file = hf_dir / "model.safetensors", hf_dir / "pytorch_model.bin"
    if safetensors_file.is_file():
        return ckpt.read_weights(safetensors_file)
    if pickle_file.is_file():
        return ckpt.torch_load(pickle_file)  # the weights-only unpickler: tensors, nothing else
    raise MarianImportError(
        f"{hf_dir}: no model.safetensors or pytorch_model.bin (sharded checkpoints are not read)"
    )


def checked_position_tables(cfg: ModelConfig, hf: dict[str, torch.Tensor]) -> set[str]:
    """The sinusoid tables a checkpoint holds, checked to be those vaswani computes."""
    found = (
        {name for name in POSITION_TABLES if name in hf} if cfg.positions == "sinusoidal" else set()
    )
    for name in found:
        table, skip = hf[name].float(), cfg.position_offset  # rows kept for padding: any
        expected = sinusoidal_encoding(table.size(0), cfg.d_model, cfg.sinusoid_layout)
        if table.shape != expected.shape or not torch.allclose(
            table[skip:], expected[skip:], atol=1e-4
        ):
            raise MarianImportError(f"weights: {name} is not the model's sinusoid table")
    return found


def convert_weights(cfg: ModelConfig, hf: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """vaswani tensors (float32) from Marian ones; refuses tensors it would have to leave out."""
    hf = {name.removeprefix("module."): tensor for name, tensor in hf.items()}
    used: set[str] = set()

    def fetch(name: str) -> torch.Tensor:
        for candidate in [name, *ALIASES.get(name, [])]:
            if candidate in hf:
                used.add(candidate)
                return hf[candidate]
        raise MarianImportError(f"weights: no tensor {name}")

    out = {
        ours: torch.cat([fetch(n) for n in theirs]) for ours, theirs in weight_names(cfg).items()
    }
    if cfg.output_bias:  # HF keeps it as (1, V)
        out["output_projection.bias"] = out["output_projection.bias"].reshape(-1)
    # Tied copies that a checkpoint also stores must really be the same tensor.
    tied = {
        "all": ["model.encoder.embed_tokens.weight", "lm_head.weight"],
        "decoder": ["lm_head.weight"],
        "none": [],
    }[cfg.tie_embeddings]
    for name in tied:
        if name in hf and name not in used:
            if not torch.equal(hf[name], out["decoder.embed.token.weight"]):
                raise MarianImportError(
                    f"weights: {name} differs from the decoder embedding it is tied to"
                )
            used.add(name)
    if "model.shared.weight" in hf:
        used.add("model.shared.weight")
    used |= checked_position_tables(cfg, hf)
    unused = sorted(set(hf) - used)
    if unused:
        raise MarianImportError(
            "weights: tensors with no place in vaswani's Marian layout: "
            + ", ".join(unused[:6])
            + (" ..." if len(unused) > 6 else "")
        )
    return {name: tensor.float().contiguous() for name, tensor in out.items()}


def load_marian_model(hf_dir: Path, cfg: ModelConfig) -> Transformer:
    """A vaswani model of `cfg` holding the weights of the Marian model directory `hf_dir`."""
    model = Transformer(cfg)
    tensors = convert_weights(cfg, read_hf_weights(hf_dir))
    aliases = ckpt.unique_state(model)[1]  # a tied tensor goes by the model's first name for it
    ckpt.load_weights(model, {aliases.get(k, k): v for k, v in tensors.items()}, hf_dir)
    return model


def imported_meta(
    hf_dir: Path, tokenizer_meta: dict[str, Any], src_tok: Any, source: str
) -> dict[str, Any]:
    """The data record of an imported model: its tokenizer and, for a multilingual model, its
    languages: those `vaswani export` wrote (LANGUAGES_FILE), or for an OPUS-MT model `source`
    paired with each `>>xxx<<` token's."""
    meta: dict[str, Any] = {"tokenizer": tokenizer_meta}
    if (hf_dir / LANGUAGES_FILE).is_file():
        record = read_json(hf_dir / LANGUAGES_FILE, "languages record", dict)
        try:
            languages = Languages.from_meta({"languages": record})
            missing = [
                t for t in languages.targets if src_tok.token_id(languages.token_of(t)) is None
            ]
        except (KeyError, TypeError, ValueError) as error:
            raise MarianImportError(f"{hf_dir / LANGUAGES_FILE}: damaged ({error})") from None
        if missing:
            raise MarianImportError(
                f"{hf_dir / LANGUAGES_FILE}: the tokenizer has no token for {', '.join(missing)}"
            )
        meta["languages"] = languages.record()
    elif tokenizer_meta["kind"] == "marian":
        languages = marian_languages(src_tok.vocab, source)
        if languages is not None:
            meta["languages"] = languages.record()
    return meta


def import_marian(hf_dir: Path, out: Path, source: str = "mul") -> Path:
    """Write a vaswani run directory at `out` from the Hugging Face Marian directory `hf_dir`.

    The result has config.json, data.json (recording the import, the tokenizer and, for a
    multilingual model, its languages: `source` paired with each `>>xxx<<` token's), the
    SentencePiece models and vocabularies, and best/ weights: every command that takes
    `--checkpoint RUN_DIR` accepts it.
    """
    from vaswani.data.tokenizer import load_tokenizers, vocab_mismatch
    from vaswani.run import BEST, CONFIG, DATA_INFO

    hf_dir, out = Path(hf_dir), Path(out)
    try:
        source = code(source)
    except ValueError as error:
        raise MarianImportError(f"--source-lang: {error}") from None
    if not (hf_dir / "config.json").is_file():
        raise MarianImportError(f"{hf_dir}: no config.json; give a Hugging Face model directory")
    if out.exists() and any(out.iterdir()):
        raise MarianImportError(f"{out}: exists and is not empty; choose a new directory")
    hf_config = read_json(hf_dir / "config.json", "model config", dict)
    cfg = model_config(hf_config)
    tokenizer_config = hf_dir / "tokenizer_config.json"
    separate = (
        read_json(tokenizer_config, "tokenizer config", dict).get("separate_vocabs", False)
        if tokenizer_config.is_file()
        else False
    )
    files = dict(FILES, **({"tgt_vocab": TARGET_VOCAB} if separate else {}))
    tokenizer_meta: dict[str, Any] = {"kind": "marian", "files": files}
    if not (hf_dir / FILES["src"]).is_file() and (hf_dir / BPE_FILE).is_file():
        tokenizer_meta = bpe_tokenizer_meta(hf_dir)  # a model `vaswani export` wrote
        files = tokenizer_meta["files"]
    for name in files.values():
        if not (hf_dir / name).is_file():
            raise MarianImportError(f"{hf_dir}: no {name} (the tokenizer files are needed)")

    model = load_marian_model(hf_dir, cfg)

    out.mkdir(parents=True, exist_ok=True)
    for name in set(files.values()):
        shutil.copyfile(hf_dir / name, out / name)
    try:
        src_tok, tgt_tok = load_tokenizers(out, tokenizer_meta)
    except ValueError as error:
        raise MarianImportError(f"{hf_dir}: unusable tokenizer files: {error}") from None
    mismatch = vocab_mismatch(src_tok, tgt_tok, cfg.vocab_size, cfg.target_vocab_size)
    if mismatch:
        raise MarianImportError(f"{hf_dir}: {mismatch}")
    info = {
        "path": None,
        "imported_from": {"format": "marian", "path": str(hf_dir.resolve())},
        "meta": imported_meta(hf_dir, tokenizer_meta, src_tok, source),
    }
    (out / CONFIG).write_text(json.dumps(cfg.to_dict(), indent=2) + "\n")
    (out / DATA_INFO).write_text(json.dumps(info, indent=2) + "\n")
    ckpt.write_checkpoint(out, BEST, {ckpt.WEIGHTS: lambda p: ckpt.save_weights(model, p)})
    return out
