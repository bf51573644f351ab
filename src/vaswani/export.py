"""Run directories out of vaswani: to CTranslate2 (a fast inference engine, optionally int8) and to
Hugging Face (`MarianMTModel`, the inverse of `vaswani import-marian`).

Both write the model with the tokenizer files a user needs beside it, and refuse, naming the
`ModelConfig` field, what the target cannot represent, instead of writing a different model.

Marian adds sinusoids as all the sines, then all the cosines (`sinusoid_layout="halves"`); the
paper, and vaswani by default, interleave them. A model with interleaved sinusoids is exported
exactly all the same: the order of the d_model features is arbitrary to the network (embeddings,
LayerNorm, residual sums and every projection see them through weights), so every weight that
reads or writes the residual stream is permuted once, and the sinusoids then arrive in Marian's
order. The exported model computes the same logits; importing it back gives the permuted weights
with `sinusoid_layout="halves"`.
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
from pathlib import Path

import torch
from torch import Tensor, nn

from vaswani.config import ModelConfig
from vaswani.errors import VaswaniError
from vaswani.hub import HF_CONFIG, KEPT, family_of, hub_config, hub_tensors
from vaswani.marian import (
    BPE_FILE,
    BPE_TARGET_FILE,
    FILES,
    LANGUAGES_FILE,
    TARGET_VOCAB,
    bart_fields,
    split_tensors,
)
from vaswani.model import sinusoidal_encoding
from vaswani.safe_io import member, read_json
from vaswani.translation.engine import Engine, load_run

FORMATS = ("ctranslate2", "huggingface")
QUANTIZATIONS = ("int8", "int8_float32", "int16", "float16", "bfloat16", "float32")
MARIAN_ACTIVATIONS = {"relu": "relu", "gelu": "gelu", "silu": "swish"}


class ExportError(VaswaniError):
    """A model the target format cannot represent, or an output place that cannot be written."""


def export(
    run_dir: Path, to: str, out: Path, weights: str = "best", quantization: str | None = None
) -> Path:
    """Export run directory `run_dir` in format `to` ("ctranslate2" or "huggingface") to `out`."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ExportError(f"{out}: exists and is not an empty directory; choose a new one")
    run = load_run(Path(run_dir), weights)
    if not run.task.parallel:
        raise ExportError(f"{run_dir}: only translation models can be exported (task {run.task})")
    if to == "huggingface":
        if quantization is not None:
            raise ExportError(f"quantization={quantization!r} is for to='ctranslate2'")
        return to_huggingface(run, out)
    if to == "ctranslate2":
        return to_ctranslate2(run, out, quantization)
    raise ExportError(f"to={to!r}: choose one of {', '.join(FORMATS)}")


def residual_permutation(cfg: ModelConfig) -> Tensor | None:
    """The order of d_model features that turns interleaved sinusoids into Marian's halves; None
    when the model has them in that order already."""
    if cfg.sinusoid_layout == "halves":
        return None
    d = cfg.d_model
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])
    table = sinusoidal_encoding(8, d, "interleaved")
    assert torch.equal(table[:, perm], sinusoidal_encoding(8, d, "halves"))
    return perm


def permuted(state: dict[str, Tensor], perm: Tensor) -> dict[str, Tensor]:
    """The weights of the same network with its residual stream's features in `perm` order: the
    input columns of every layer that reads it, the output rows (and bias) of every layer that
    writes it, and the LayerNorms over it."""
    reads = (
        "embed.token.weight",
        "qkv_proj.weight",
        "q_proj.weight",
        "kv_proj.weight",
        "ffn.linear1.weight",
        "output_projection.weight",
    )
    writes = ("out_proj.", "ffn.linear2.", "norm.")
    out = {}
    for name, tensor in state.items():
        if name.endswith(reads):
            tensor = tensor[:, perm]
        elif any(part in name for part in writes):
            tensor = tensor[perm]
        out[name] = tensor.contiguous()
    return out


def marian_refusals(cfg: ModelConfig) -> list[str]:
    needs = {
        "norm": ("post", "Marian is post-norm; train with the model setting norm=post"),
        "positions": ("sinusoidal", "Marian has no learned positions"),
    }
    problems = [
        f"{field}={getattr(cfg, field)!r}: {why}"
        for field, (value, why) in needs.items()
        if getattr(cfg, field) != value
    ]
    if cfg.layer_norm_eps != 1e-5:
        problems.append(f"layer_norm_eps={cfg.layer_norm_eps}: Marian's is 1e-5")
    if cfg.activation not in MARIAN_ACTIVATIONS:
        problems.append(f"activation={cfg.activation!r}: Marian has relu, gelu, swish")
    return problems


def marian_config(cfg: ModelConfig) -> dict:
    """config.json of the `MarianMTModel` that computes what `cfg` does."""
    return {
        "architectures": ["MarianMTModel"],
        "model_type": "marian",
        **bart_fields(cfg),
        "decoder_vocab_size": cfg.target_vocab_size,
        "activation_function": MARIAN_ACTIVATIONS[cfg.activation],
        "bos_token_id": cfg.bos_id,
        "forced_eos_token_id": None,  # vaswani does not force an end at the length limit
        "share_encoder_decoder_embeddings": cfg.tie_embeddings == "all",
        "tie_word_embeddings": cfg.tie_embeddings != "none",
        "init_std": 0.02,
    }


def marian_tensors(model: nn.Module) -> dict[str, Tensor]:
    """The Marian checkpoint's tensors of a `Transformer` (each tied copy written out, as
    safetensors needs)."""
    cfg = model.cfg
    state = {name: t.detach().float().cpu() for name, t in model.state_dict().items()}
    perm = residual_permutation(cfg)
    if perm is not None:
        state = permuted(state, perm)
    if "output_projection.bias" not in state:
        state["output_projection.bias"] = torch.zeros(cfg.target_vocab_size)
    state.setdefault("output_projection.weight", state["decoder.embed.token.weight"])
    state.setdefault("encoder.embed.token.weight", state["decoder.embed.token.weight"])
    tensors = split_tensors(
        state, dataclasses.replace(cfg, tie_embeddings="none", output_bias=True)
    )
    tensors["final_logits_bias"] = tensors["final_logits_bias"].reshape(1, -1)
    if cfg.tie_embeddings == "all":
        tensors["model.shared.weight"] = tensors["model.decoder.embed_tokens.weight"].clone()
    halves = sinusoidal_encoding(cfg.max_len, cfg.d_model, "halves")
    for side in ("encoder", "decoder"):
        tensors[f"model.{side}.embed_positions.weight"] = halves.clone()
    return tensors


def to_huggingface(run: Engine, out: Path) -> Path:
    """A folder that `MarianMTModel.from_pretrained` loads, with the tokenizer beside it:
    `MarianTokenizer`'s files for a run imported from Marian, otherwise vaswani's BPE as a
    `PreTrainedTokenizerFast` (tokenizer.json)."""
    from safetensors.torch import save_file

    cfg = run.config
    if family_of(cfg) is not None:
        return to_hub_family(run, out)
    problems = marian_refusals(cfg)
    if problems:
        raise ExportError("Hugging Face Marian cannot represent this model: " + "; ".join(problems))
    tensors = marian_tensors(run.model)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / "model.safetensors"), metadata={"format": "pt"})
    (out / "config.json").write_text(json.dumps(marian_config(cfg), indent=2) + "\n")
    write_hf_tokenizer(run, out)
    return out


def to_hub_family(run: Engine, out: Path) -> Path:
    """An M2M-100 / NLLB-200 or mBART folder (`vaswani.hub`) with the tokenizer files the run
    was imported with."""
    from safetensors.torch import save_file

    cfg = run.config
    imported = {}
    if (run.path / HF_CONFIG).is_file():
        imported = read_json(run.path / HF_CONFIG, "imported model config", dict)
    out.mkdir(parents=True, exist_ok=True)
    save_file(hub_tensors(run.model), str(out / "model.safetensors"), metadata={"format": "pt"})
    config = hub_config(cfg, family_of(cfg), imported)
    (out / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    for name in set(run.info["meta"]["tokenizer"]["files"].values()) | set(KEPT):
        if (run.path / name).is_file():
            shutil.copyfile(member(run.path, name, "data.json"), out / name)
    return out


def write_hf_tokenizer(run: Engine, out: Path) -> None:
    tokenizer = run.info["meta"]["tokenizer"]
    files = tokenizer["files"]
    if tokenizer.get("kind") == "marian":
        copy_tokenizer_files(run, out)
        config = {
            "tokenizer_class": "MarianTokenizer",
            "separate_vocabs": TARGET_VOCAB in files.values(),
            "source_spm": FILES["src"],
            "target_spm": FILES["tgt"],
        }
    else:
        sides = {"src": BPE_FILE}
        if files["src"] != files["tgt"]:
            sides["tgt"] = BPE_TARGET_FILE
        for side, name in sides.items():
            source = member(run.path, files[side], "data.json")
            write_bpe_with_end(source, out / name, run.config.eos_id)
        write_languages(run, out)
        config = {
            "tokenizer_class": "PreTrainedTokenizerFast",
            "pad_token": "<pad>",
            "bos_token": "<s>",
            "eos_token": "</s>",
            "unk_token": "<unk>",
        }
    (out / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")


def copy_tokenizer_files(run: Engine, to: Path) -> None:
    """The tokenizer files the run's data record names (each checked to be inside the run), and
    a multilingual model's languages (LANGUAGES_FILE: its pairs and target-language tokens)."""
    for name in set(run.info["meta"]["tokenizer"]["files"].values()):
        shutil.copyfile(member(run.path, name, "data.json"), to / name)
    write_languages(run, to)


def write_languages(run: Engine, to: Path) -> None:
    """A multilingual model's languages beside its tokenizer (`vaswani import-marian` reads
    them back); nothing for a model of one pair."""
    if run.languages is not None:
        (to / LANGUAGES_FILE).write_text(json.dumps(run.languages.record(), indent=2) + "\n")


def write_bpe_with_end(source: Path, target: Path, eos_id: int) -> None:
    """vaswani's tokenizer.json with a post-processor that ends each text with </s>, as the model
    expects (vaswani's batching adds it; a Hugging Face tokenizer must)."""
    from tokenizers import Tokenizer, processors

    tokenizer = Tokenizer.from_file(str(source))
    tokenizer.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", eos_id)]
    )
    tokenizer.save(str(target))


CT2_ACTIVATIONS = {"relu": "RELU", "gelu": "GELU", "silu": "SWISH"}


def to_ctranslate2(run: Engine, out: Path, quantization: str | None) -> Path:
    """A CTranslate2 model directory made with its specification API (`pip install
    'vaswani[export]'`), quantized as asked; vaswani's tokenizer files, and the tokenizer record
    that names them, are copied into vaswani_tokenizer/ beside it."""
    src_vocab, tgt_vocab = run.src_tokenizer.vocabulary(), run.tgt_tokenizer.vocabulary()
    save_ctranslate2(run.model, src_vocab, tgt_vocab, out, quantization)
    tokenizer = run.info["meta"]["tokenizer"]
    (out / "vaswani_tokenizer").mkdir()
    copy_tokenizer_files(run, out / "vaswani_tokenizer")
    record = json.dumps(tokenizer, indent=2) + "\n"
    (out / "vaswani_tokenizer" / "tokenizer_record.json").write_text(record)
    return out


def save_ctranslate2(
    model: nn.Module,
    src_vocab: list[str],
    tgt_vocab: list[str],
    out: Path,
    quantization: str | None = None,
) -> None:
    """Write `model` (a `Transformer`) as a CTranslate2 model directory: token strings by id,
    sources ending with end-of-sentence, decoding starting from the model's start token."""
    try:
        from ctranslate2.specs import common_spec, transformer_spec
    except ImportError:
        raise ExportError(
            "to='ctranslate2' needs CTranslate2: pip install 'vaswani[export]'"
        ) from None
    if quantization is not None and quantization not in QUANTIZATIONS:
        raise ExportError(
            f"quantization={quantization!r}: choose one of {', '.join(QUANTIZATIONS)}"
        )
    cfg = model.cfg
    spec = transformer_spec.TransformerSpec.from_config(
        (cfg.n_encoder_layers, cfg.n_decoder_layers),
        cfg.n_heads,
        pre_norm=cfg.norm == "pre",
        activation=getattr(common_spec.Activation, CT2_ACTIVATIONS[cfg.activation]),
        layernorm_embedding=cfg.embedding_norm,
    )
    # Copies: CTranslate2 transforms the arrays it is given in place (quantization).
    state = {
        name: t.detach().float().cpu().numpy().copy() for name, t in model.state_dict().items()
    }
    fill_ct2_spec(spec, state, cfg)
    spec.register_source_vocabulary(src_vocab)
    spec.register_target_vocabulary(tgt_vocab)
    spec.config.bos_token = tgt_vocab[cfg.bos_id]
    spec.config.eos_token = tgt_vocab[cfg.eos_id]
    spec.config.decoder_start_token = tgt_vocab[cfg.bos_id]
    spec.config.unk_token = "<unk>" if "<unk>" in tgt_vocab else tgt_vocab[cfg.pad_id]
    spec.config.add_source_eos = True  # vaswani ends every source with end-of-sentence
    spec.config.layer_norm_epsilon = cfg.layer_norm_eps
    spec.validate()
    spec.optimize(quantization=quantization)
    out.mkdir(parents=True, exist_ok=True)
    spec.save(str(out))


def fill_ct2_spec(spec, state: dict, cfg: ModelConfig) -> None:  # noqa: ANN001
    """Put vaswani's weights into a CTranslate2 `TransformerSpec` (fused projections match:
    query|key|value for self-attention, key|value for encoder-decoder attention)."""
    scale = math.sqrt(cfg.d_model) if cfg.scale_embeddings else 1.0
    for side in ("encoder", "decoder"):
        stack = getattr(spec, side)
        stack.scale_embeddings = scale
        rows = cfg.max_len + cfg.position_offset  # CTranslate2's table starts at position 0
        if cfg.positions == "learned":
            table = state[f"{side}.embed.learned.weight"]
        else:
            table = sinusoidal_encoding(rows, cfg.d_model, cfg.sinusoid_layout).numpy()
        stack.position_encodings.encodings = table[cfg.position_offset :]
        if cfg.embedding_norm:
            set_norm(stack.layernorm_embedding, state, f"{side}.embed.norm")
        embeddings = stack.embeddings[0] if side == "encoder" else stack.embeddings
        embeddings.weight = state.get(
            f"{side}.embed.token.weight", state["decoder.embed.token.weight"]
        )
        if cfg.norm == "pre":
            set_norm(stack.layer_norm, state, f"{side}.final_norm")
        for i, layer in enumerate(stack.layer):
            prefix = f"{side}.layers.{i}."
            set_linear(layer.self_attention.linear[0], state, prefix + "self_attn.qkv_proj")
            set_linear(layer.self_attention.linear[1], state, prefix + "self_attn.out_proj")
            set_norm(layer.self_attention.layer_norm, state, prefix + "self_attn_norm.norm")
            if side == "decoder":
                set_linear(layer.attention.linear[0], state, prefix + "cross_attn.q_proj")
                set_linear(layer.attention.linear[1], state, prefix + "cross_attn.kv_proj")
                set_linear(layer.attention.linear[2], state, prefix + "cross_attn.out_proj")
                set_norm(layer.attention.layer_norm, state, prefix + "cross_attn_norm.norm")
            set_linear(layer.ffn.linear_0, state, prefix + "ffn.linear1")
            set_linear(layer.ffn.linear_1, state, prefix + "ffn.linear2")
            set_norm(layer.ffn.layer_norm, state, prefix + "ffn_norm.norm")
    projection = spec.decoder.projection
    projection.weight = state.get("output_projection.weight", state["decoder.embed.token.weight"])
    if "output_projection.bias" in state:
        projection.bias = state["output_projection.bias"]


def set_linear(spec, state: dict, name: str) -> None:  # noqa: ANN001
    spec.weight = state[f"{name}.weight"]
    if f"{name}.bias" in state:
        spec.bias = state[f"{name}.bias"]


def set_norm(spec, state: dict, name: str) -> None:  # noqa: ANN001
    spec.gamma = state[f"{name}.weight"]
    spec.beta = state[f"{name}.bias"]
