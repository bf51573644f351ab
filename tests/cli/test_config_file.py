"""`--config FILE` and `--print-config`: a YAML file of settings stands for the same flags."""

import argparse
import json
from pathlib import Path

import pytest
from safetensors.torch import load_file

from helpers import cli
from vaswani.cli import build_parser, with_config
from vaswani.config.settings_files import ConfigFileError

TRAIN_FLAGS = [
    "--preset",
    "tiny",
    "--model",
    "d_model=32",
    "--model",
    "d_ff=64",
    "--batch-tokens",
    "512",
    "--max-steps",
    "6",
    "--eval-every",
    "6",
    "--eval-sentences",
    "8",
    "--precision",
    "fp32",
    "--seed",
    "3",
    "--ema-decay",
    "0",
]
TRAIN_YAML = """\
preset: tiny
model: {d_model: 32, d_ff: 64}
batch_tokens: 512
max_steps: 6
eval_every: 6
eval_sentences: 8
precision: fp32
seed: 3
ema_decay: 0
"""


def parsed(argv):
    parser = build_parser()
    args = vars(parser.parse_args(with_config(parser, argv)))
    args.pop("config", None)
    return args


def test_a_config_file_and_the_same_flags_train_the_same_run(numbers_data, tmp_path, capsys):
    config = tmp_path / "exp.yaml"
    config.write_text(f"data: {numbers_data}\n" + TRAIN_YAML)
    runs = {
        "flags": ["--data", str(numbers_data), *TRAIN_FLAGS],
        "file": ["--config", str(config)],
    }
    for name, argv in runs.items():
        code, _, err = cli(capsys, "train", *argv, "--out", str(tmp_path / name))
        assert code == 0, err
    # The run's own config.yaml repeats it.
    code, _, err = cli(
        capsys,
        "train",
        "--config",
        str(tmp_path / "file" / "config.yaml"),
        "--out",
        str(tmp_path / "again"),
    )
    assert code == 0, err
    settings = {}
    for name in ("flags", "file", "again"):
        settings[name] = json.loads((tmp_path / name / "train_config.json").read_text())
        assert settings[name].pop("out") == str(tmp_path / name)
    assert settings["flags"] == settings["file"] == settings["again"]
    weights = [load_file(tmp_path / name / "best" / "model.safetensors") for name in settings]
    for key, value in weights[0].items():
        assert all(value.equal(other[key]) for other in weights[1:]), key


@pytest.mark.parametrize("command", ["train", "prepare"])
def test_the_printed_template_loads_back_as_the_defaults(command, tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        cli(capsys, command, "--print-config")
    template = capsys.readouterr().out
    assert stop.value.code == 0 and "# " in template
    (tmp_path / "template.yaml").write_text(template)
    assert parsed([command, "--config", str(tmp_path / "template.yaml")]) == parsed([command])


def test_flags_on_the_command_line_override_the_file(tmp_path):
    config = tmp_path / "exp.yaml"
    config.write_text("batch_tokens: 1024\nmax_minutes: 20\nmodel: {d_ff: 64, dropout: 0.2}\n")
    args = parsed(
        ["train", "--config", str(config), "--batch-tokens", "512", "--model", "d_ff=128"]
    )
    assert args["batch_tokens"] == 512 and args["max_minutes"] == 20
    assert args["model"] == ["d_ff=64", "dropout=0.2", "d_ff=128"]  # the last of a key wins
    prepare = tmp_path / "prep.yaml"
    prepare.write_text("inputs: [a.tsv]\nout: data/a\ndrop_held_out: false\nweight: [a.tsv=2]\n")
    args = parsed(["prepare", "--config", str(prepare)])
    assert args["inputs"] == ["a.tsv"] and args["drop_held_out"] is False
    assert args["weight"] == [("a.tsv", 2.0)]
    args = parsed(["prepare", "b.tsv", "--config", str(prepare), "--drop-held-out"])
    assert args["inputs"] == ["b.tsv"] and args["drop_held_out"] is True


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("batch_token: 512\n", "unknown key 'batch_token'; did you mean 'batch_tokens'?"),
        ("max_steps: ten\n", "max_steps: expected N, found 'ten'"),
        ("schedule: cosine\n", "schedule: expected one of inverse-sqrt, linear, wsd"),
        ("ema_decay: [1, 2]\n", "ema_decay: expected one value"),
        ("model: d_ff=64\n", "model: expected a mapping"),
        ("preset: tiny\n  bad: [\n", "exp.yaml:2:6: not valid YAML"),
        ("- preset\n- tiny\n", "should hold a mapping of settings"),
        ("batch_tokens: -5\n", "batch"),
    ],
)
def test_a_bad_config_file_is_one_line_and_starts_nothing(tmp_path, capsys, text, message):
    (tmp_path / "exp.yaml").write_text(text)
    code, out, err = cli(
        capsys,
        "train",
        "--config",
        str(tmp_path / "exp.yaml"),
        "--data",
        str(tmp_path / "none"),
        "--out",
        str(tmp_path / "run"),
        "--max-steps",
        "1",
    )
    assert code == 2 and len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "run").exists()


def test_the_example_config_files_are_the_demo(tmp_path):
    """examples/numbers-de.*.yaml hold what `vaswani demo` runs, so they cannot drift from it."""
    from vaswani.cli.fields import settings_from
    from vaswani.cli.train import SETTINGS
    from vaswani.config import TrainConfig
    from vaswani.demo import TRAINING

    examples = Path(__file__).resolve().parents[2] / "examples"
    args = argparse.Namespace(
        **parsed(["train", "--config", str(examples / "numbers-de.train.yaml")])
    )
    model = dict(item.split("=", 1) for item in args.model)
    paths = {"data": str(args.data), "out": str(args.out)}
    tc = settings_from(TrainConfig, args, SETTINGS, **paths, model=model)
    demo = TrainConfig(**paths, max_steps=2000, log_every=20, seed=0, **TRAINING)
    assert {**tc.to_dict(), "model": {}} == {**demo.to_dict(), "model": {}}
    assert {key: str(value) for key, value in demo.model.items()} == model
    prepare = parsed(["prepare", "--config", str(examples / "numbers-de.prepare.yaml")])
    assert prepare["inputs"] == ["numbers-de"] and prepare["vocab_size"] == 400


def test_python_loads_the_same_files_as_the_commands(tmp_path):
    """TrainConfig.from_file and PrepareOptions.from_file read the files of --config: the demo's
    two examples give the settings the commands parse from them."""
    from vaswani.config import TrainConfig
    from vaswani.data import PrepareOptions

    examples = Path(__file__).resolve().parents[2] / "examples"
    tc = TrainConfig.from_file(examples / "numbers-de.train.yaml")
    args = parsed(["train", "--config", str(examples / "numbers-de.train.yaml")])
    assert (tc.data, tc.out) == (str(args["data"]), str(args["out"]))
    for key in ("preset", "batch_tokens", "warmup", "lr_scale", "max_steps", "eval_every", "seed"):
        assert getattr(tc, key) == args[key], key
    assert tc.model == {"d_model": 64, "d_ff": 256, "dropout": 0.0, "max_len": 64}
    assert TrainConfig.from_file(examples / "numbers-de.train.yaml", max_steps=5).max_steps == 5
    opts = PrepareOptions.from_file(examples / "numbers-de.prepare.yaml")  # inputs, out: arguments
    assert (opts.numbers_size, opts.vocab_size, opts.seed) == (30000, 400, 0)
    other = tmp_path / "prepare.yaml"
    other.write_text("exclude: [a.txt, b.txt]\ntokenizer_from: runs/opus\nvocab_sise: 300\n")
    with pytest.raises(
        ConfigFileError, match="unknown key 'vocab_sise'; did you mean 'vocab_size'"
    ):
        PrepareOptions.from_file(other)
    other.write_text("exclude: [a.txt, b.txt]\ntokenizer_from: runs/opus\n")
    opts = PrepareOptions.from_file(other)
    assert opts.exclude == (Path("a.txt"), Path("b.txt"))
    assert opts.tokenizer_from == Path("runs/opus")
    bad = tmp_path / "train.yaml"
    bad.write_text("data: d\nout: o\nmax_steps: 10\nbatch_tokens: many\n")
    with pytest.raises(ConfigFileError, match="batch_tokens must be int"):
        TrainConfig.from_file(bad)
