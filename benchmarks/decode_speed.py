"""Decoding speed of vaswani next to Hugging Face `MarianMTModel.generate`, in one run.

Both sides hold the same model: a post-norm encoder-decoder with sinusoidal positions and scaled,
tied embeddings (the architecture of the paper and of OPUS-MT), vaswani's randomly initialised
weights copied into a `MarianMTModel` (vaswani's position table too, so the two compute the same
function; the script checks that their logits agree before timing). Every run decodes a batch of
sources with a fixed number of new tokens (end-of-sentence forbidden until then, stopped there),
greedy and with beam 4, in fp32 and with both models cast to bf16, and reports new target tokens per second
(batch x new tokens / seconds; for beams, tokens of the returned best hypotheses).

    pip install -e .[bench]      # transformers, for the reference only
    python benchmarks/decode_speed.py [--batch 32] [--src-len 24] [--new 64 128 256]
"""

from __future__ import annotations

import argparse
import time

import torch

from vaswani import ModelConfig, Transformer
from vaswani.config import DecodeConfig
from vaswani.decode import decode


def marian_copy(model: Transformer):
    """A transformers `MarianMTModel` computing the same function as `model` (post-norm only)."""
    from transformers import MarianConfig, MarianMTModel

    cfg = model.cfg
    if cfg.norm != "post" or cfg.positions != "sinusoidal" or cfg.tie_embeddings != "all":
        raise ValueError("Marian is post-norm with sinusoidal positions and tied embeddings")
    hf = MarianMTModel(
        MarianConfig(
            vocab_size=cfg.vocab_size,
            d_model=cfg.d_model,
            encoder_layers=cfg.n_encoder_layers,
            decoder_layers=cfg.n_decoder_layers,
            encoder_attention_heads=cfg.n_heads,
            decoder_attention_heads=cfg.n_heads,
            encoder_ffn_dim=cfg.d_ff,
            decoder_ffn_dim=cfg.d_ff,
            activation_function=cfg.activation,
            max_position_embeddings=cfg.max_len,
            scale_embedding=cfg.scale_embeddings,
            dropout=0.0,
            attention_dropout=0.0,
            activation_dropout=0.0,
            pad_token_id=cfg.pad_id,
            eos_token_id=cfg.eos_id,
            decoder_start_token_id=cfg.bos_id,
            forced_eos_token_id=None,
            bad_words_ids=None,
            share_encoder_decoder_embeddings=True,
            tie_word_embeddings=True,
        )
    ).eval()
    ours = model.state_dict()
    theirs: dict[str, torch.Tensor] = {"model.shared.weight": ours["decoder.embed.token.weight"]}
    for side in ("encoder", "decoder"):
        pos = getattr(model, side).embed.sinusoid
        getattr(hf.model, side).embed_positions.weight.data.copy_(pos)
        theirs[f"model.{side}.embed_tokens.weight"] = ours[f"{side}.embed.token.weight"]
        for i in range(getattr(cfg, f"n_{side}_layers")):
            a, b = f"{side}.layers.{i}.", f"model.{side}.layers.{i}."
            for kind in ("weight", "bias"):
                for j, name in enumerate("qkv"):
                    theirs[f"{b}self_attn.{name}_proj.{kind}"] = ours[
                        f"{a}self_attn.qkv_proj.{kind}"
                    ].chunk(3)[j]
                theirs[f"{b}self_attn.out_proj.{kind}"] = ours[f"{a}self_attn.out_proj.{kind}"]
                theirs[f"{b}self_attn_layer_norm.{kind}"] = ours[f"{a}self_attn_norm.norm.{kind}"]
                theirs[f"{b}fc1.{kind}"] = ours[f"{a}ffn.linear1.{kind}"]
                theirs[f"{b}fc2.{kind}"] = ours[f"{a}ffn.linear2.{kind}"]
                theirs[f"{b}final_layer_norm.{kind}"] = ours[f"{a}ffn_norm.norm.{kind}"]
                if side == "decoder":
                    theirs[f"{b}encoder_attn.q_proj.{kind}"] = ours[f"{a}cross_attn.q_proj.{kind}"]
                    k, v = ours[f"{a}cross_attn.kv_proj.{kind}"].chunk(2)
                    theirs[f"{b}encoder_attn.k_proj.{kind}"] = k
                    theirs[f"{b}encoder_attn.v_proj.{kind}"] = v
                    theirs[f"{b}encoder_attn.out_proj.{kind}"] = ours[
                        f"{a}cross_attn.out_proj.{kind}"
                    ]
                    theirs[f"{b}encoder_attn_layer_norm.{kind}"] = ours[
                        f"{a}cross_attn_norm.norm.{kind}"
                    ]
    missing, unexpected = hf.load_state_dict(theirs, strict=False)
    left = [
        k
        for k in missing
        if "embed_positions" not in k and k not in ("lm_head.weight", "final_logits_bias")
    ]
    if left or unexpected:
        raise RuntimeError(f"weights not copied: missing {left}, unexpected {unexpected}")
    hf.lm_head.weight = hf.model.shared.weight
    return hf


def timed(repeats: int, fn, *args, **kwargs) -> tuple[float, object]:
    """Best wall time of `repeats` calls of fn(*args, **kwargs), and its result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        best = min(best, time.perf_counter() - start)
    return best, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="small")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--src-len", type=int, default=24)
    parser.add_argument("--new", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--beams", type=int, nargs="+", default=[1, 4])
    parser.add_argument("--precisions", nargs="+", default=["fp32", "bf16"])
    parser.add_argument("--repeats", type=int, default=2, help="best of this many runs")
    parser.add_argument("--threads", type=int, default=torch.get_num_threads())
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)

    cfg = ModelConfig.from_preset(
        args.preset, norm="post", dropout=0.0, max_len=max(args.new) + args.src_len + 8
    )
    model = Transformer(cfg).eval()
    hf = marian_copy(model)
    src = torch.randint(4, cfg.vocab_size, (args.batch, args.src_len))
    src[:, -1] = cfg.eos_id
    tgt = torch.randint(4, cfg.vocab_size, (args.batch, 16))
    with torch.no_grad():
        ours = model(src, tgt)
        theirs = hf(
            input_ids=src, attention_mask=torch.ones_like(src), decoder_input_ids=tgt
        ).logits
    gap = (ours - theirs).abs().max().item()
    if gap > 1e-3:
        raise RuntimeError(f"the two models disagree: max |logit difference| {gap:.2e}")

    print(
        f"{args.preset} (d_model {cfg.d_model}, {cfg.n_encoder_layers}+{cfg.n_decoder_layers} "
        f"layers, vocab {cfg.vocab_size}), batch {args.batch}, source {args.src_len} tokens, "
        f"{torch.get_num_threads()} threads, torch {torch.__version__}; "
        f"max |logit difference| {gap:.1e}"
    )
    print("| precision | search | new tokens | vaswani tok/s | generate tok/s | speed-up |")
    print("| --- | --- | ---: | ---: | ---: | ---: |")
    seconds: dict[tuple[str, str, int], float] = {}
    for precision in args.precisions:
        # bf16: both models' weights are cast once (autocast would cast them again every step).
        dtype = torch.bfloat16 if precision == "bf16" else torch.float32
        model, hf = model.to(dtype), hf.to(dtype)
        for beams in args.beams:
            for new in args.new:
                dc = DecodeConfig(
                    beam_size=beams, max_new_tokens=new, min_new_tokens=new, max_tokens=1 << 30
                )
                ours_s, found = timed(args.repeats, decode, model, src, dc)
                theirs_s, out = timed(
                    args.repeats,
                    hf.generate,
                    input_ids=src,
                    attention_mask=torch.ones_like(src),
                    num_beams=beams,
                    do_sample=False,
                    max_new_tokens=new,
                    min_new_tokens=new,
                    length_penalty=0.6 if beams > 1 else 1.0,
                    early_stopping=False,
                )
                assert all(len(h[0].tokens) == new for h in found)
                assert out.shape == (args.batch, new + 1), out.shape
                if beams == 1 and precision == "fp32":
                    same = sum(
                        h[0].tokens == row[1:].tolist() for h, row in zip(found, out, strict=True)
                    )
                    note = f" (same greedy output for {same}/{args.batch} sentences)"
                else:
                    note = ""
                tokens = args.batch * new
                search = "greedy" if beams == 1 else f"beam {beams}"
                seconds[precision, search, new] = ours_s
                print(
                    f"| {precision} | {search} | {new} | {tokens / ours_s:,.0f} | "
                    f"{tokens / theirs_s:,.0f} | {theirs_s / ours_s:.2f}x |{note}",
                    flush=True,
                )

    # Growth with length: doubling the new tokens should cost about twice as much (target <= 2.2x).
    for (precision, search, new), ours_s in seconds.items():
        if (precision, search, 2 * new) in seconds:
            ratio = seconds[precision, search, 2 * new] / ours_s
            print(f"vaswani {precision} {search}: {2 * new} tokens cost {ratio:.2f}x {new} tokens")


if __name__ == "__main__":
    with torch.no_grad():
        main()
