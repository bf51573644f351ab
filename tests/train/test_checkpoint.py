import json
import os
import pickle
import random
import subprocess
import sys
import textwrap
import time

import pytest
import torch

from vaswani import ModelConfig, Transformer
from vaswani import checkpoint as ckpt
from vaswani.safe_io import write_atomic


def model(**overrides) -> Transformer:
    return Transformer(ModelConfig.from_preset("tiny", **overrides))


def save_step(directory, step, net) -> "os.PathLike":
    path = ckpt.write_checkpoint(
        directory, ckpt.step_name(step), {ckpt.WEIGHTS: lambda p: ckpt.save_weights(net, p)}
    )
    ckpt.set_latest(directory, path)
    return path


def test_weights_round_trip_and_tied_tensors_are_stored_once(tmp_path):
    net = model()
    ckpt.save_weights(net, tmp_path / "w.safetensors")
    tensors = ckpt.read_weights(tmp_path / "w.safetensors")
    assert "decoder.embed.token.weight" in tensors or "encoder.embed.token.weight" in tensors
    assert "output_projection.weight" not in tensors  # an alias of the shared embedding
    other = model()
    ckpt.load_weights(other, tensors, "w")
    for (name, a), (_, b) in zip(net.state_dict().items(), other.state_dict().items(), strict=True):
        assert torch.equal(a, b), name
    assert (
        other.output_projection.weight is other.encoder.embed.token.weight
    )  # still tied after loading


def test_mismatched_checkpoint_lists_keys_and_leaves_the_model_unchanged(tmp_path):
    ckpt.save_weights(model(d_ff=128, n_decoder_layers=3), tmp_path / "w.safetensors")
    target = model()
    before = {k: v.clone() for k, v in target.state_dict().items()}
    with pytest.raises(ckpt.CheckpointError) as error:
        ckpt.load_weights(target, ckpt.read_weights(tmp_path / "w.safetensors"), "w")
    message = str(error.value)
    assert "extra: decoder.layers.2." in message
    assert "mis-shaped: " in message and "(checkpoint (128, 32), model (64, 32))" in message
    assert all(torch.equal(before[k], v) for k, v in target.state_dict().items())


def test_flipped_byte_is_caught_and_the_newest_valid_checkpoint_is_used(tmp_path):
    net = model()
    older = save_step(tmp_path, 1, net)
    newer = save_step(tmp_path, 2, net)
    data = bytearray((newer / ckpt.WEIGHTS).read_bytes())
    data[-5] ^= 0x01  # one bit of tensor data: safetensors itself would load this silently
    (newer / ckpt.WEIGHTS).write_bytes(bytes(data))
    with pytest.raises(ckpt.CheckpointError, match=f"checkpoint corrupt: {newer / ckpt.WEIGHTS}"):
        ckpt.verify(newer)
    with pytest.warns(UserWarning, match="checkpoint corrupt"):
        assert ckpt.latest_valid(tmp_path) == older


def test_truncated_weights_file_is_reported_as_corrupt(tmp_path):
    path = tmp_path / "w.safetensors"
    ckpt.save_weights(model(), path)
    path.write_bytes(path.read_bytes()[:100])
    with pytest.raises(ckpt.CheckpointError, match=f"checkpoint corrupt: {path}"):
        ckpt.read_weights(path)


class Payload:
    """Unpickling this would create a marker file."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


@pytest.mark.parametrize("filename", [ckpt.OPTIMIZER, ckpt.RNG, ckpt.WEIGHTS])
def test_malicious_pickle_is_refused_and_never_runs(tmp_path, filename):
    marker = tmp_path / "pwned"
    checkpoint = save_step(tmp_path / "ckpts", 1, model())
    payload = pickle.dumps(Payload(marker))
    (checkpoint / filename).write_bytes(payload)
    # A careful attacker also fixes the manifest, so the loaders themselves must refuse.
    manifest = json.loads((checkpoint / ckpt.MANIFEST).read_text())
    manifest[filename] = ckpt.sha256_file(checkpoint / filename)
    write_atomic(checkpoint / ckpt.MANIFEST, json.dumps(manifest).encode())
    ckpt.verify(checkpoint)
    with pytest.raises(ckpt.CheckpointError):
        if filename == ckpt.WEIGHTS:
            ckpt.read_weights(checkpoint / filename)
        else:
            ckpt.torch_load(checkpoint / filename)
    torch.save({"x": torch.ones(1)}, tmp_path / "plain.pt")  # what a real file holds still loads
    assert torch.equal(ckpt.torch_load(tmp_path / "plain.pt")["x"], torch.ones(1))
    assert not marker.exists()


def test_failing_save_keeps_the_old_checkpoint_and_leaves_nothing_partial(tmp_path):
    net = model()
    good = save_step(tmp_path, 1, net)

    def disk_full(path):
        path.write_bytes(b"partial")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        ckpt.write_checkpoint(tmp_path, ckpt.step_name(2), {ckpt.WEIGHTS: disk_full})
    assert not (tmp_path / ckpt.step_name(2)).exists()
    assert not list(tmp_path.glob(".tmp-*"))
    assert ckpt.latest_valid(tmp_path) == good


def test_prune_keeps_the_newest(tmp_path):
    net = model()
    for step in range(1, 6):
        save_step(tmp_path, step, net)
    ckpt.prune(tmp_path, keep_last=2)
    assert [p.name for p in ckpt.step_dirs(tmp_path)] == [ckpt.step_name(4), ckpt.step_name(5)]


SAVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    from vaswani import ModelConfig, Transformer
    from vaswani import checkpoint as ckpt

    directory = Path(sys.argv[1])
    net = Transformer(ModelConfig.from_preset("small", vocab_size=4000))
    existing = ckpt.step_dirs(directory)
    step = int(existing[-1].name.split("-")[1]) if existing else 0  # numbering goes on, as in a resume
    while True:
        step += 1
        path = ckpt.write_checkpoint(
            directory, ckpt.step_name(step), {ckpt.WEIGHTS: lambda p: ckpt.save_weights(net, p)}
        )
        ckpt.set_latest(directory, path)
        ckpt.prune(directory, 3)
        print("saved", flush=True)
    """
)


@pytest.mark.slow
def test_sigkill_at_random_moments_during_saves_never_leaves_a_bad_latest(tmp_path):
    rng = random.Random(0)
    directory = tmp_path / "ckpts"
    previous = None
    for _ in range(4):
        child = subprocess.Popen(
            [sys.executable, "-c", SAVER, str(directory)], stdout=subprocess.PIPE, text=True
        )
        # One complete save first (start-up takes from one to several seconds, by machine), then a
        # kill at a random moment of the saves that follow.
        assert child.stdout.readline() == "saved\n", "the saver failed before its first save"
        time.sleep(rng.random())
        child.kill()
        child.wait()
        child.stdout.close()
        leftovers = sorted(directory.glob(".*tmp-*"))
        reader = ckpt.latest_valid(directory)  # verifies the manifest
        assert sorted(directory.glob(".*tmp-*")) == leftovers  # a reader deletes nothing
        found = ckpt.latest_valid(directory, clean=True)  # the writer, resuming, cleans up
        assert found == reader
        assert found is not None, "a complete checkpoint disappeared"
        assert previous is None or found.name >= previous.name
        previous = found
        assert (directory / ckpt.LATEST).read_text().strip() == found.name
        assert not list(directory.glob(".*tmp-*"))  # leftovers cleaned
        ckpt.load_weights(
            model_small := Transformer(ModelConfig.from_preset("small", vocab_size=4000)),
            ckpt.read_weights(found / ckpt.WEIGHTS),
            found,
        )
        del model_small
    assert ckpt.latest_valid(directory) is not None


def test_train_state_reads_every_older_state_json():
    from vaswani.tasks import get_task
    from vaswani.train.state import TrainState

    translate, lm = get_task("translate"), get_task("lm")
    oldest = {
        "step": 7,
        "position": [1, 3],
        "elapsed_seconds": 2.0,
        "target_tokens": 90,
        "skipped_steps": 0,
        "best_bleu": 12.5,
        "data_fingerprint": "f",
    }
    state = TrainState.from_dict(oldest, translate)
    # chosen by BLEU then, by chrF now: not comparable, so the next evaluation sets it afresh
    assert state.best is None and state.best_figure == "valid_chrf" and state.overflow_steps == 0
    assert state.position == (1, 3) and state.step == 7
    lm_state = TrainState.from_dict({**oldest, "best_bleu": 3.2}, lm)
    assert lm_state.best == 3.2 and lm_state.best_figure == "valid_loss"
    again = TrainState.from_dict(state.to_dict(), translate)
    assert again == state and again.to_dict()["position"] == [1, 3]


def test_weights_saved_under_the_old_output_projection_name_still_load(tmp_path):
    from safetensors.torch import save_file

    saved = model(tie_embeddings="none")
    tensors = {
        name.replace("output_projection.", "generator."): tensor.contiguous()
        for name, tensor in ckpt.unique_state(saved)[0].items()
    }
    assert "generator.weight" in tensors
    save_file(tensors, str(tmp_path / "old.safetensors"))
    loaded = model(tie_embeddings="none")
    ckpt.load_weights(loaded, ckpt.read_weights(tmp_path / "old.safetensors"), "old")
    assert torch.equal(loaded.output_projection.weight, saved.output_projection.weight)
