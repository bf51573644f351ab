"""`vaswani plot`: files written, not empty, with the expected panels."""

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

from vaswani import plot
from vaswani.cli import main
from vaswani.decoding.text import TextModel
from vaswani.run import load_trained


def test_attention_maps_have_a_panel_per_head_and_layer(numbers_run, tmp_path):
    model, src_tok, tgt_tok, _ = load_trained(numbers_run)
    cfg = model.cfg
    figures = plot.attention(TextModel(model, src_tok, tgt_tok), "271493", tmp_path / "att.png")
    assert set(figures) == {"encoder", "decoder", "cross"}
    expected = {"encoder": cfg.n_encoder_layers, "decoder": cfg.n_decoder_layers}
    expected["cross"] = cfg.n_decoder_layers
    for kind, fig in figures.items():
        assert plot.panels(fig) == expected[kind] * cfg.n_heads
        assert (tmp_path / f"att-{kind}.png").stat().st_size > 10_000


def test_token_labels_do_not_overlap_for_a_40_token_sentence(numbers_run, tmp_path):
    model, src_tok, tgt_tok, _ = load_trained(numbers_run)
    sentence = "".join(str(i % 10) for i in range(39))  # digits are single tokens
    fig = plot.attention(TextModel(model, src_tok, tgt_tok), sentence, tmp_path / "long.svg")[
        "encoder"
    ]
    canvas = FigureCanvasAgg(fig)  # the figure was closed after saving; draw it again
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    for labels in (ax.get_yticklabels(), ax.get_xticklabels()):
        boxes = [label.get_window_extent(renderer) for label in labels]
        assert len(boxes) == 40
        for one, next_one in zip(boxes, boxes[1:], strict=False):
            assert not one.overlaps(next_one)
    assert (tmp_path / "long-encoder.svg").read_text().startswith("<?xml")


def test_positional_encoding_and_training_curves(numbers_run, tmp_path):
    fig = plot.positional_encoding(64, 50, tmp_path / "pe.png")
    assert plot.panels(fig) == 1 and len(fig.axes) == 2  # the map and its colour bar
    fig = plot.training(numbers_run, tmp_path / "curves.svg")
    assert plot.panels(fig) == 4
    assert (tmp_path / "curves.svg").stat().st_size > 10_000


def test_plot_commands_write_their_files(numbers_run, tmp_path, capsys):
    assert (
        main(["plot", "positional-encoding", "--d-model", "32", "--out", str(tmp_path / "p.png")])
        == 0
    )
    assert main(["plot", "training", str(numbers_run), "--out", str(tmp_path / "t.png")]) == 0
    args = [
        "plot",
        "attention",
        "--checkpoint",
        str(numbers_run),
        "42",
        "--out",
        str(tmp_path / "a.png"),
    ]
    assert main(args) == 0
    for name in ("p.png", "t.png", "a-encoder.png", "a-decoder.png", "a-cross.png"):
        assert (tmp_path / name).stat().st_size > 5_000
    assert "wrote" in capsys.readouterr().out


def test_plot_errors_are_one_line(tmp_path, capsys):
    assert main(["plot", "training", str(tmp_path)]) == 2
    assert "no metrics.jsonl" in capsys.readouterr().err
    assert main(["plot", "positional-encoding", "--out", str(tmp_path / "x.jpg")]) == 2
    assert "write .png or .svg" in capsys.readouterr().err


def test_an_empty_sentence_cannot_be_plotted(numbers_run, tmp_path):
    model, src_tok, tgt_tok, _ = load_trained(numbers_run)
    with pytest.raises(ValueError, match="empty"):
        plot.attention(TextModel(model, src_tok, tgt_tok), "", tmp_path / "x.png")
