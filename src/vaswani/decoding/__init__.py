"""Decoding: everything between a trained model and its output that is not the paper's modules.

    cache.py      the KV cache's buffers and the beam layout (`KVCache`, `BeamCache`, `new_cache`)
    output.py     the output projection as a decoding loop uses it (a shortlist's rows, one reused
                  buffer) and the reductions over its logits (log-normaliser, top-k) done in blocks
    shortlist.py  the lexical shortlist: which target tokens a sentence's search scores
    quantize.py   int8 weights for decoding on a CPU
    search.py     greedy search, beam search with the length penalty (§6.1), sampling: ids in,
                  hypotheses out
    text.py       text in, text out: tokenizing, length batching, `translate`, `generate`, `classify`

Training never goes through this package: its forward pass is the model's own over whole sequences.
"""
