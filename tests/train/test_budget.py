"""Training fitted to a budget: schedules that know their end, the horizon a time budget buys, what
`auto` chooses (and keeps on resume), the weight average and --patience."""

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from vaswani import checkpoint as ckpt
from vaswani import device, evaluate, tasks
from vaswani.cli.train import calibrate_finished
from vaswani.config import ModelConfig, TrainConfig
from vaswani.data import PreparedData
from vaswani.run import CONFIDENCE
from vaswani.safe_io import DamagedFileError
from vaswani.train import loop, recipe
from vaswani.train.average import WeightAverage
from vaswani.train.budget import Closing, Ledger
from vaswani.train.loop import train
from vaswani.train.schedule import noam_lr, schedule_named
from vaswani.train.setup import resume_config
from vaswani.translation.engine import Engine


def test_linear_schedule_warms_up_then_falls_to_zero_at_the_horizon():
    schedule = schedule_named("linear")(peak=1e-3, warmup=10, horizon=100)
    rates = [schedule(step) for step in range(1, 101)]
    assert rates[9] == pytest.approx(1e-3) == max(rates)
    assert rates[4] == pytest.approx(0.5e-3)  # linear warm-up
    assert rates[54] == pytest.approx(1e-3 * 45 / 90)  # halfway down: (100 - 55) / (100 - 10)
    assert rates[-1] == 0.0
    assert all(a > b for a, b in zip(rates[9:], rates[10:], strict=False))


def test_wsd_schedule_holds_the_peak_then_cools_down_over_the_last_fifth():
    schedule = schedule_named("wsd")(peak=2e-3, warmup=10, horizon=100)
    rates = [schedule(step) for step in range(1, 101)]
    assert rates[9:80] == [2e-3] * 71  # constant until update 80 = 100 - 20% of 100
    assert rates[89] == pytest.approx(1e-3)  # halfway through the cool-down
    assert rates[-1] == 0.0


def test_inverse_sqrt_schedule_is_the_papers():
    peak = 256**-0.5 * 100**-0.5 * 2.0
    schedule = schedule_named("inverse-sqrt")(peak=peak, warmup=100)
    for step in (1, 50, 100, 101, 5000):
        assert schedule(step) == pytest.approx(noam_lr(step, 256, 100, scale=2.0))


def test_a_horizon_shorter_than_the_warm_up_still_reaches_the_peak_and_zero():
    schedule = schedule_named("linear")(peak=1.0, warmup=100, horizon=10)
    assert schedule(5) == 1.0 and schedule(10) == 0.0


def test_auto_takes_the_largest_size_the_budget_buys_enough_tokens_for():
    fields = {"vocab_size": 1000}
    timed = []

    def timer(preset, model, batch_tokens):
        timed.append(preset)
        return seconds[preset]

    seconds = {"micro": 0.08, "mini": 0.1, "small": 0.3, "base": 1.0}
    tc = TrainConfig(data="d", out="o", max_minutes=60)  # plenty for micro to small, not base
    params = {
        p: recipe.parameter_count("translate", fields, p, recipe.AUTO_MODEL.get(p, {}))
        for p in recipe.CANDIDATES
    }
    bought = {p: 3600 * 0.9 / seconds[p] * 2048 for p in params}
    choice = recipe.choose_size(tc, "translate", fields, timer)
    expected = [
        p for p in recipe.CANDIDATES if bought[p] / params[p] >= recipe.TOKENS_PER_PARAMETER
    ]
    assert choice.preset == (expected[-1] if expected else "micro") == "small"
    assert choice.measured["mini"]["step_seconds"] == 0.1
    assert "tokens/parameter" in choice.reason
    # A step budget needs no timing.
    timed.clear()
    assert (
        recipe.choose_size(
            TrainConfig(data="d", out="o", max_steps=10), "translate", fields, timer
        ).preset
        == "micro"
    )
    assert timed == []


def test_plan_follows_the_horizon_and_keeps_what_the_user_set():
    tc = TrainConfig(data="d", out="o", max_steps=1000)
    plan = recipe.plan(tc, d_model=256, horizon=1000)
    assert (plan.warmup, plan.eval_every, plan.lr) == (100, 125, recipe.PEAK_LR_AT_256)
    assert plan.ema_decay == pytest.approx(0.99)
    mine = recipe.plan(
        TrainConfig(data="d", out="o", max_steps=1000, warmup=7, lr=1e-4, ema_decay=0.0), 256, 1000
    )
    assert (mine.warmup, mine.lr, mine.ema_decay) == (7, 1e-4, 0.0)


def test_weight_average_equals_a_hand_computation(tiny):
    from vaswani.model import Transformer

    model = Transformer(tiny)
    average = WeightAverage(model, decay=0.9, start=1)
    first = [p.detach().clone() for p in model.parameters()]
    average.update(1)  # up to `start`: a copy
    expected = [p.clone() for p in first]
    for step in (2, 3):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p))
        average.update(step)
        expected = [
            0.9 * e + 0.1 * p.detach() for e, p in zip(expected, model.parameters(), strict=True)
        ]
    for got, want in zip(average.model.parameters(), expected, strict=True):
        assert torch.allclose(got, want, atol=1e-6)
    # Tied weights are one parameter: the average's are tied too.
    assert average.model.output_projection.weight is average.model.decoder.embed.token.weight


class FakeClock:
    """Half a second per update, whatever the machine: time-driven plans become reproducible."""

    updates = 0

    def __init__(self, elapsed: float, tokens: int, began: float | None = None) -> None:
        self.time = elapsed

    def elapsed(self) -> float:
        FakeClock.updates += 1
        self.time += 0.5
        return self.time

    def now(self) -> float:  # validations and saves take no time on this clock
        return self.time

    def rate(self, tokens: int) -> float:
        return 1.0

    def deadline(self, seconds: float) -> None:  # nothing is cut short on this clock
        return None


class StopAfter:
    """A StopRequest that asks to stop (as Ctrl-C does) once `after` updates have run."""

    after: int | None = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    @property
    def requested(self) -> bool:
        return StopAfter.after is not None and FakeClock.updates >= StopAfter.after


def budget_config(data: Path, out: Path, **overrides) -> TrainConfig:
    settings = dict(
        data=str(data),
        out=str(out),
        preset="tiny",
        precision="fp32",
        batch_tokens=512,
        log_every=1,
        max_minutes=0.25,
        eval_sentences=8,
        # A fixed count: a time budget otherwise times and changes it as it goes, and the
        # resumed runs here must compute as the uninterrupted ones did, bit for bit.
        threads=torch.get_num_threads(),
    )
    settings.update(overrides)
    return TrainConfig(**settings)


@pytest.fixture
def fake_time(monkeypatch):
    monkeypatch.setattr(loop, "Clock", FakeClock)
    monkeypatch.setattr(loop, "StopRequest", StopAfter)
    monkeypatch.setattr(recipe, "update_seconds", lambda *args, **kwargs: 0.5)
    FakeClock.updates, StopAfter.after = 0, None
    yield
    StopAfter.after = None


def losses(run: Path) -> list:
    lines = (run / "metrics.jsonl").read_text().splitlines()
    return [(r["step"], r["loss"], r["lr"]) for r in map(json.loads, lines) if "loss" in r]


# wsd here: the linear schedule, the default, is resumed bit-exact after a SIGKILL in
# test_loop.py's killed-run test (whose runs leave --schedule unset).
@pytest.mark.parametrize("schedule", ["wsd"])
def test_interrupted_time_budget_resumes_bit_exact(numbers_data, tmp_path, fake_time, schedule):
    whole = train(
        budget_config(numbers_data, tmp_path / "whole", schedule=schedule), progress=False
    )
    # 15 s at 0.5 s an update, minus validation's expected share: 27 updates planned, and the
    # re-plans at each validation keep the end where the time runs out.
    assert whole.stopped_by == "max_minutes"
    rates = losses(tmp_path / "whole")
    assert rates[-1][2] < rates[len(rates) // 2][2] and whole.step <= 30
    FakeClock.updates, StopAfter.after = 0, whole.step // 2
    half = train(budget_config(numbers_data, tmp_path / "split", schedule=schedule), progress=False)
    assert half.stopped_by == "interrupt" and half.step == whole.step // 2
    StopAfter.after = None
    resumed = train(resume_config(tmp_path / "split"), resume=True, progress=False)
    assert resumed.step == whole.step
    assert losses(tmp_path / "whole") == losses(tmp_path / "split")
    a, b = (
        ckpt.read_weights(ckpt.latest_valid(tmp_path / r / "checkpoints") / ckpt.WEIGHTS)
        for r in ("whole", "split")
    )
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_the_rate_reaches_zero_at_the_end_of_a_step_budget(numbers_data, tmp_path):
    train(
        budget_config(
            numbers_data,
            tmp_path / "run",
            max_minutes=None,
            max_steps=12,
            schedule="linear",
            warmup=3,
        ),
        progress=False,
    )
    rates = [lr for _, _, lr in losses(tmp_path / "run")]
    assert len(rates) == 12 and rates[2] == max(rates) and rates[-1] == 0.0


def test_raising_the_budget_on_resume_moves_the_end_and_says_so(numbers_data, tmp_path, capsys):
    run = tmp_path / "run"
    train(
        budget_config(
            numbers_data, run, max_minutes=None, max_steps=10, schedule="linear", warmup=2
        ),
        progress=False,
    )
    train(resume_config(run, max_steps=20), resume=True, progress=True)
    err = capsys.readouterr().err
    assert "the schedule now ends at update 20 instead of 10" in err
    rates = [lr for _, _, lr in losses(run)]
    assert len(rates) == 20 and rates[9] == 0.0 and rates[10] > 0 and rates[-1] == 0.0


def test_auto_choice_is_printed_recorded_and_kept_on_resume(
    numbers_data, tmp_path, fake_time, capsys, monkeypatch
):
    timed = []

    def timer(tc, cfg, data, dist, precision, updates=3):
        timed.append(cfg.d_model)
        return 0.5

    monkeypatch.setattr(recipe, "update_seconds", timer)
    run = tmp_path / "auto"
    StopAfter.after = 4
    train(
        TrainConfig(
            data=str(numbers_data),
            out=str(run),
            max_minutes=0.1,
            eval_sentences=4,
            ema_decay=0.0,
            precision="fp32",
        ),
        progress=True,
    )
    err = capsys.readouterr().err
    assert "preset: micro (auto: the budget buys" in err
    record = json.loads((run / recipe.RECORD).read_text())
    assert record["choice"]["preset"] == "micro" and record["schedule"] == "linear"
    assert json.loads((run / "train_config.json").read_text())["preset"] == "auto"
    config = json.loads((run / "config.json").read_text())
    assert config["d_model"] == 96
    # 6 s at 0.5 s an update buy 10.8 updates of 2,048 tokens, 0.7 passes over the data's
    # 31,888 target tokens: no dropout
    assert "dropout: 0 (auto: the budget shows the model its training data about" in err
    assert config["dropout"] == 0.0 and record["dropout"]["dropout"] == 0.0
    timed.clear()
    StopAfter.after = None
    train(resume_config(run), resume=True, progress=False)
    assert timed == []  # nothing is timed again: the recorded choice and horizon are kept
    assert json.loads((run / recipe.RECORD).read_text()) == record


def test_a_cpu_with_bf16_trains_in_the_precision_it_measured_faster_and_keeps_it_on_resume(
    numbers_data, tmp_path, fake_time, capsys, monkeypatch
):
    # A CPU whose bf16 auto would pick, where the model's update is faster in fp32 (a small
    # width on AMX): the run times both and trains in fp32; its resume keeps fp32 untimed.
    monkeypatch.setattr(device, "pick_precision", lambda *args: ("bf16", "auto: native bf16"))
    speeds = {"bf16": 0.3, "fp32": 0.2}
    timed = []

    def timer(tc, cfg, data, dist, precision, updates=3):
        timed.append(precision)
        return speeds[precision]

    monkeypatch.setattr(recipe, "update_seconds", timer)
    run = tmp_path / "measured"
    StopAfter.after = 3
    settings = budget_config(numbers_data, run, precision="auto", max_minutes=0.1)
    train(settings, progress=True)
    assert sorted(timed) == ["bf16", "fp32"]
    err = capsys.readouterr().err
    assert "precision: fp32 (auto: an update of the tiny model took 0.300 s in bf16 and " in err
    assert json.loads((run / "environment.json").read_text())["precision"] == "fp32"
    record = json.loads((run / recipe.RECORD).read_text())["precision"]
    assert record == {"chosen": "fp32", "update_seconds": {"bf16": 0.3, "fp32": 0.2}}
    speeds.update(bf16=0.1)  # the machine changed its mind: the run still computes as it began
    timed.clear()
    StopAfter.after = None
    train(resume_config(run), resume=True, progress=True)
    assert timed == [] and "precision: fp32 (kept from the run's start)" in capsys.readouterr().err


@pytest.mark.parametrize("bf16, chosen", [(0.25, "fp32"), (0.2, "bf16")])
def test_bf16_is_chosen_only_where_it_is_timed_clearly_faster(bf16, chosen):
    timer = recipe.UpdateTimer(None, None, None, ("bf16", "fp32"))
    tc = SimpleNamespace(preset="mini", batch_tokens=1024)
    timer.speeds["mini", 1024] = {"bf16": bf16, "fp32": 0.3}  # 1.2x and 1.5x faster in bf16
    record = {}
    assert timer.settle_precision(tc, record, resume=False) == chosen
    assert record["precision"]["chosen"] == chosen and timer.precisions == (chosen,)


def test_a_run_asked_for_its_dropout_keeps_it(numbers_data, tmp_path, fake_time):
    run = tmp_path / "asked"
    StopAfter.after = 1
    settings = TrainConfig(
        data=str(numbers_data), out=str(run), max_minutes=0.1, model={"dropout": 0.2}
    )
    train(settings, progress=False)
    assert json.loads((run / "config.json").read_text())["dropout"] == 0.2
    assert "dropout" not in json.loads((run / recipe.RECORD).read_text())


def test_a_budget_that_shows_the_model_its_data_few_times_trains_without_dropout():
    data = SimpleNamespace(meta={"splits": {"train": {"tgt_lengths": {"tokens": 1000}}}})
    reason = recipe.few_epochs(2500, data)
    assert reason.startswith("auto: the budget shows the model its training data about 2.5 times")
    assert recipe.few_epochs(recipe.FEW_EPOCHS * 1000, data) is None  # often enough: kept
    del data.meta["splits"]["train"]["tgt_lengths"]["tokens"]  # prepared before it was counted
    assert recipe.few_epochs(2500, data) is None


def test_a_budget_of_few_updates_trains_on_smaller_batches_to_make_more():
    lengths = {"src_lengths": {"max": 40}, "tgt_lengths": {"max": 40}}
    data = SimpleNamespace(meta={"splits": {"train": lengths}})
    assert recipe.fitted_batch(4096, recipe.MIN_UPDATES, data) == 4096  # enough: as the preset
    assert recipe.fitted_batch(4096, recipe.MIN_UPDATES / 2, data) == 2048
    assert recipe.fitted_batch(4096, recipe.MIN_UPDATES / 2.5, data) == 1600  # a multiple of 64
    assert recipe.fitted_batch(4096, 10, data) == recipe.MIN_BATCH
    # a step budget of 500 updates: the time buys them all, or half of them
    assert recipe.fitted_batch(4096, 500, data, wanted=500) == 4096
    assert recipe.fitted_batch(4096, 250, data, wanted=500) == 2048
    lengths["tgt_lengths"]["max"] = recipe.MIN_BATCH + 100
    assert recipe.fitted_batch(4096, 10, data) == recipe.MIN_BATCH + 101  # the longest pair fits


def test_the_fitted_batch_is_printed_recorded_and_kept_on_resume(
    numbers_data, tmp_path, fake_time, capsys, monkeypatch
):
    timed = []

    def timer(tc, cfg, data, dist, precision, updates=3):
        timed.append(tc.batch_tokens)
        return 0.5 * tc.batch_tokens / 2048

    monkeypatch.setattr(recipe, "update_seconds", timer)
    run = tmp_path / "fitted"
    StopAfter.after = 3
    # 15 s at 0.5 s an update of 2048 tokens: 27 updates after validation's share.
    train(budget_config(numbers_data, run, batch_tokens=None), progress=True)
    fitted = recipe.MIN_BATCH  # 2048 * 27 / MIN_UPDATES is below the floor
    assert timed == [2048, fitted]  # the preset's, then the fitted size, whose pace plans the run
    err = capsys.readouterr().err
    assert f"batch: {fitted} tokens (auto: the budget buys about 27 updates of 2048 tokens;" in err
    assert json.loads((run / recipe.RECORD).read_text())["batch"]["batch_tokens"] == fitted
    assert json.loads((run / "train_config.json").read_text())["batch_tokens"] is None
    timed.clear()
    StopAfter.after = None
    train(resume_config(run), resume=True, progress=False)
    assert timed == []
    assert json.loads((run / recipe.RECORD).read_text())["batch"]["batch_tokens"] == fitted


def test_a_step_budget_the_time_buys_keeps_the_presets_batch(numbers_data, tmp_path, fake_time):
    # 15 s buy 27 updates of 2,048 tokens (at 0.5 s each), more than the 20 steps asked for
    run = tmp_path / "steps"
    StopAfter.after = 1
    train(budget_config(numbers_data, run, batch_tokens=None, max_steps=20), progress=False)
    assert "batch" not in json.loads((run / recipe.RECORD).read_text())


def test_paced_slices_start_none_but_the_first_that_would_end_past_the_deadline():
    def taken(deadline, seconds_each=0.0):
        parts = []
        for part in tasks.paced_slices(60, deadline, 5, 20):
            parts.append((part.start, part.stop))
            time.sleep(seconds_each * (part.stop - part.start))
        return parts

    assert taken(None) == [(0, 60)]
    assert taken(time.perf_counter() + 3600) == [(0, 5), (5, 25), (25, 45), (45, 60)]
    assert taken(time.perf_counter() - 1) == [(0, 5)]  # passed: the first slice only
    # 5 sentences at 0.02 s each leave 0.3 s: 20 more would take 0.4 s and are not started.
    assert taken(time.perf_counter() + 0.4, seconds_each=0.02) == [(0, 5)]


def test_patience_stops_at_the_right_validation(numbers_data, tmp_path, monkeypatch):
    figures = iter([10.0, 12.0, 11.0, 12.0, 9.0, 30.0, 40.0])

    def validate(model, data, tc, device, deadline=None):
        return {"valid_loss": 1.0, "valid_chrf": next(figures), "valid_bleu": 0.0}

    monkeypatch.setattr(loop, "evaluate", validate)
    result = train(
        budget_config(
            numbers_data,
            tmp_path / "run",
            max_minutes=None,
            max_steps=50,
            eval_every=2,
            patience=3,
            ema_decay=0.0,
        ),
        progress=False,
    )
    # chrF 10, 12 (best), 11, 12 (not better), 9: three validations without a better figure.
    assert result.stopped_by == "patience" and result.step == 10 and result.best == 12.0
    assert ckpt.latest_valid(tmp_path / "run" / "checkpoints").name == ckpt.step_name(10)


@pytest.mark.slow
def test_max_minutes_is_a_deadline_even_when_steps_and_validations_are_slow(
    numbers_data, tmp_path, monkeypatch
):
    """A busy machine: every update takes 0.15 s, every validation over 1 s and every 25
    sentences of the calibration after training 0.4 s more (all of them: over 2 s). The run must
    end, with a valid checkpoint of its last step and a calibration, by the deadline it was given,
    setup included: no validation, save or slice of the calibration starts that cannot end in
    time (before, the run trained until the budget was spent and only then validated and saved,
    and the calibration came after the budget)."""
    real_update, real_evaluate = loop.train_update, loop.evaluate
    real_translate = Engine.translate_nbest

    def slow_update(*args, **kwargs):
        time.sleep(0.15)
        return real_update(*args, **kwargs)

    def slow_evaluate(*args, **kwargs):
        time.sleep(1.0)
        return real_evaluate(*args, **kwargs)

    def slow_translate(engine, texts, *args, **kwargs):
        time.sleep(0.016 * len(texts))  # 0.4 s for 25
        return real_translate(engine, texts, *args, **kwargs)

    monkeypatch.setattr(loop, "train_update", slow_update)
    monkeypatch.setattr(loop, "evaluate", slow_evaluate)
    monkeypatch.setattr(Engine, "translate_nbest", slow_translate)
    monkeypatch.setattr(evaluate, "CALIBRATION_SLICE", 25)
    monkeypatch.setattr(recipe, "update_seconds", lambda *args, **kwargs: 0.15)
    budget = 6.0
    settings = dict(max_minutes=budget / 60, schedule="inverse-sqrt", warmup=10, eval_every=4)
    began = time.perf_counter()
    tc = budget_config(numbers_data, tmp_path / "run", **settings)
    result = train(tc, progress=False, calibrating=True)
    trained = time.perf_counter() - began
    calibrate_finished(result.run_dir, result.deadline)
    took = time.perf_counter() - began
    assert result.stopped_by == "max_minutes" and result.step >= 4
    # The final validation and save, and the calibration after them (as long as the longest
    # validation: over 1 s), were reserved for: the whole run ends on time (with 0.75 s for
    # returning and for a machine busier than when the costs were measured), where the old loop
    # overran by a validation (over 1 s) and a save: 7.4 s, and then calibrated.
    assert trained < budget - 1.0 and (tmp_path / "run" / CONFIDENCE).exists()
    assert took < budget + 0.75, f"{took:.2f} s for a budget of {budget} s"
    latest = ckpt.latest_valid(tmp_path / "run" / "checkpoints")
    assert latest is not None and latest.name == ckpt.step_name(result.step)
    last = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()][-1]
    assert last["step"] == result.step and "valid_chrf" in last
    # time.json says where the time went: every update and validation, each at least as long
    # as it was made to take, and the accounts add up to the run's time.
    spent = Ledger.read(tmp_path / "run")
    assert spent.counts["updates"] == result.step and spent.counts["validation"] >= 2
    assert spent.seconds["updates"] >= 0.15 * result.step
    assert spent.seconds["validation"] >= 1.0 * spent.counts["validation"]
    assert spent.counts["saving"] == spent.counts["validation"]  # save_every: at validations
    assert spent.total == pytest.approx(trained, abs=0.5)
    assert spent.line().startswith(f"time: {spent.total:.1f} s: ")
    assert f"updates {spent.seconds['updates']:.1f} s" in spent.line()


def test_the_end_of_a_run_is_its_validation_save_and_calibration():
    measured = dict(validate=2.0, save=0.5)
    assert Closing(**measured).end() == 2.5 and Closing(**measured).end(validating=True) == 5.0
    # A calibration follows: as long as the longest validation is kept for it.
    calibrating = Closing(**measured, calibrating=True)
    assert calibrating.calibrate == 2.0 and calibrating.end() == 4.5
    assert calibrating.end(validating=True) == 7.0


def test_the_ledger_puts_what_no_account_timed_into_other_and_survives_a_damaged_file(tmp_path):
    ledger = Ledger()
    ledger.add("updates", 6.0)
    ledger.add("updates", 2.0)
    ledger.add("validation", 1.0)
    ledger.close(10.0)
    assert ledger.seconds["other"] == 1.0 and ledger.total == 10.0
    assert "updates 8.0 s (80%, 2)" in ledger.line() and "validation 1.0 s (10%)" in ledger.line()
    ledger.write(tmp_path)
    assert Ledger.read(tmp_path) == ledger
    (tmp_path / "time.json").write_text('{"seconds": {"updates": "x"}, "counts": {}}')
    assert Ledger.read(tmp_path).seconds["updates"] == 0.0  # a value that is no number is left
    (tmp_path / "time.json").write_text("[")
    with pytest.raises(DamagedFileError, match="time accounts"):
        Ledger.read(tmp_path)


def test_validation_under_a_passed_deadline_decodes_one_chunk(numbers_data):
    data = PreparedData(numbers_data)
    model = tasks.TRANSLATE.build_model(ModelConfig.from_preset("tiny", vocab_size=300)).eval()
    late = time.perf_counter() - 1.0
    result = tasks.TRANSLATE.validate(
        model, data, tasks.Validation(1024, "fp32", 100, deadline=late)
    )
    assert result["valid_sentences"] == tasks.FIRST_CHUNK
    assert "valid_sentences" not in tasks.TRANSLATE.validate(
        model, data, tasks.Validation(1024, "fp32", 30)
    )


def test_validations_are_spaced_out_where_they_would_take_more_than_their_share():
    # 2 minutes left, 800 updates, 7 s a validation: 10% of 120 s buys one more, not 8 (100 apart).
    assert recipe.validation_cadence(100, 800, 120.0, 7.0) == 800
    # 20 minutes left: 17 validations fit, so the plan's 8 stay.
    assert recipe.validation_cadence(100, 800, 1200.0, 7.0) == 100
    assert recipe.validation_cadence(100, 800, 120.0, 4.0) == 267  # 3 fit
    assert recipe.validation_cadence(100, 800, 120.0, 7.0, asked=100) == 100  # --eval-every
    assert recipe.validation_cadence(100, 800, 120.0, 0.0) == 100  # not timed yet


def test_spaced_out_validations_follow_the_cadence_from_the_last_one(
    numbers_data, tmp_path, fake_time, monkeypatch, capsys
):
    # 15 s at 0.5 s an update: validations every 3 updates as planned (eval_every unset, 8 over
    # the horizon), until the first one finds they take too long: from then on every 7th.
    asked = []

    def cadence(eval_every, updates_left, seconds_left, validation_seconds, asked_every):
        asked.append(asked_every)
        return 7

    monkeypatch.setattr(recipe, "validation_cadence", cadence)
    result = train(budget_config(numbers_data, tmp_path / "run"), progress=True)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    validated = [r["step"] for r in records if "valid_loss" in r]
    first = validated[0]
    assert validated[:-1] == list(range(first, result.step, 7))[: len(validated) - 1]
    assert validated[-1] == result.step and len(validated) >= 3 and asked[0] is None
    assert f"validations spaced out: the next at step {first + 7}" in capsys.readouterr().err
