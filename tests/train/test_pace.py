"""A time budget's plan fitted again when the machine's load changes: a fake pace and a fake
clock, no timing."""

import json
import time
from types import SimpleNamespace

import pytest
from test_budget import budget_config

from vaswani import tasks
from vaswani.train import loop, recipe
from vaswani.train.budget import Closing, Ledger
from vaswani.train.loop import train
from vaswani.train.pace import SPAN, Fitting, PaceWatch, Pacing, refit


def test_the_watch_speaks_only_when_the_pace_departs_by_more_than_a_quarter():
    watch = PaceWatch()

    def steady(updates):  # batches of two sizes at one pace: 0.005 s a target token
        for k in range(updates):
            watch.observe(0.5 + 0.25 * (k % 2), 100 + 50 * (k % 2))

    steady(16)
    assert watch.pace is None  # 10 s: less than SPAN seconds of updates yet
    watch.observe(9.0, 100)  # one slow update (a validation) is no trend
    steady(16)
    pace = 0.005 * (8 * 100 + 8 * 150 + 100) / 17  # the tokens per update of the window
    assert watch.pace == pytest.approx(pace) and watch.departed(pace) is None
    assert watch.departed(pace * 1.15) is None  # within a quarter
    for _ in range(2):
        watch.observe(2.0, 100)  # a neighbour came: four times as slow
    assert watch.departed(pace) is None  # a fifth of the span is no trend yet
    for _ in range(6):
        watch.observe(2.0, 100)
    assert SPAN <= 8 * 2.0 and watch.departed(pace) == pytest.approx(2.0)  # the span has it
    assert watch.pace is None  # the updates kept start again on the new pace


def test_a_slower_pace_ends_the_schedule_where_the_time_runs_out():
    at = Fitting(step=100, seconds_left=50.0, warmup=54, validation_seconds=0.5)
    fit = refit(at, pace=0.4)
    assert fit.horizon == 100 + int(50.0 * (1 - recipe.EVAL_SHARE) / 0.4)  # 212
    assert fit.warmup == 54  # already warmed up: kept
    assert fit.ema_decay == pytest.approx(1 - 1 / max(10, fit.horizon / 10))
    # validations take at most a tenth of the time left: 0.5 s each, 50 s left -> 10 at most
    assert (fit.horizon - 100) / fit.eval_every <= recipe.EVAL_SHARE * 50.0 / 0.5
    early = refit(Fitting(step=5, seconds_left=50.0, warmup=54, validation_seconds=0.5), 0.4)
    assert 5 < early.warmup <= round(recipe.WARMUP_SHARE * early.horizon)  # warm-up shortened
    asked = Fitting(
        100, 50.0, 54, 0.5, max_steps=150, asked_warmup=54, asked_eval_every=7, asked_ema_decay=0.9
    )
    fixed = refit(asked, pace=0.1)
    assert fixed.horizon == 150 and fixed.eval_every == 7 and fixed.ema_decay == 0.9
    assert refit(Fitting(100, 50.0, 54, 0.5, averaging=False), 0.4).ema_decay is None


def test_a_run_at_the_pace_its_plan_was_fitted_to_is_not_fitted_again():
    """The watch's pace leaves validations out, and so does the pace the plan implies: a run
    at the pace it was fitted to is not fitted again, a pace a quarter away is."""
    fit = refit(Fitting(step=100, seconds_left=50.0, warmup=54, validation_seconds=0.5), 0.4)
    pacing = Pacing()
    pacing.tc = SimpleNamespace(max_steps=None, warmup=None, eval_every=None, ema_decay=None)
    pacing.state = SimpleNamespace(
        step=100, elapsed_seconds=250.0, horizon=fit.horizon, eval_every=fit.eval_every
    )
    pacing.max_seconds, pacing.average = 300.0, None
    pacing.schedule, pacing.closing = SimpleNamespace(warmup=54), Closing(validate=0.5, save=0.1)
    # 112 updates left and 5 validations of 0.5 s (every 27) in the 50 s left: the plan implies
    # 0.424 s an update (the whole time left over them: 0.446 s, where 0.35 s looked faster)
    for pace, expected in ((0.4, None), (0.35, None), (0.45, None), (0.56, 0.56), (0.3, 0.3)):
        pacing.pace = PaceWatch()
        for _ in range(int(SPAN / pace) + 8):
            pacing.pace.observe(pace, 100)
        found = pacing.fitted()
        assert (found and found.pace) == (expected and pytest.approx(expected)), pace
    assert fit.eval_every == 27 and found.planned == pytest.approx((50.0 - 5 * 0.5) / 112)


class FakeClock:
    """time.perf_counter for a run on a machine whose load changes: each update takes `pace`
    seconds until update `change`, then `later` (a neighbour came)."""

    def __init__(self, pace: float, change: int, later: float) -> None:
        self.now, self.updates = 1000.0, 0
        self.pace, self.change, self.later = pace, change, later

    def __call__(self) -> float:
        return self.now

    def update(self) -> None:
        self.updates += 1
        self.now += self.pace if self.updates <= self.change else self.later


def test_a_neighbour_that_comes_mid_run_moves_the_end_to_the_deadline(
    numbers_data, tmp_path, monkeypatch
):
    clock = FakeClock(pace=0.1, change=100, later=0.4)
    real_update = loop.train_update

    def paced_update(*args, **kwargs):
        clock.update()
        return real_update(*args, **kwargs)

    monkeypatch.setattr(time, "perf_counter", clock)
    monkeypatch.setattr(loop, "train_update", paced_update)
    monkeypatch.setattr(recipe, "update_seconds", lambda *args, **kwargs: 0.1)
    tc = budget_config(numbers_data, tmp_path / "run", max_minutes=1.0, schedule="linear")
    result = train(tc, progress=False)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    replanned = [r for r in records if "replanned" in r]
    # planned at 0.1 s an update: 540 updates; from update 100 on they take 0.4 s, so the 50 s
    # left buy about 112 more: the plan is fitted again once half a window has seen the change
    # (later, at most a correction as the time kept for validations goes unspent)
    first = replanned[0]
    assert first["step"] <= 100 + SPAN / 0.4  # seen once most of the span measured has it
    # (measured per target token: the fake clock charges per update, whatever its tokens)
    assert first["replanned"]["pace_seconds"] == pytest.approx(0.4, rel=0.1)
    assert 190 < first["replanned"]["horizon"] < 230
    for later in replanned[1:]:
        assert abs(later["replanned"]["horizon"] / first["replanned"]["horizon"] - 1) < 0.1
    # the run ends at the deadline with its rate at the end of the schedule, not cut off early
    assert result.stopped_by == "max_minutes"
    last = [r for r in records if "lr" in r][-1]
    peak = max(r["lr"] for r in records if "lr" in r)
    assert last["step"] >= first["replanned"]["horizon"] - 10 and last["lr"] < 0.1 * peak


def slow_run(numbers_data, tmp_path, monkeypatch, **settings):
    """A 60 s run whose updates take 0.1 s and whose validations take 0.05 s a translated
    sentence (fake clock): its metrics records."""
    clock = FakeClock(pace=0.1, change=10**9, later=0.1)
    real_update, real_translate = loop.train_update, tasks.translate

    def paced_update(*args, **kwargs):
        clock.update()
        return real_update(*args, **kwargs)

    def slow_translate(model, segments, config):
        clock.now += 0.05 * len(segments.texts)
        return real_translate(model, segments, config)

    monkeypatch.setattr(time, "perf_counter", clock)
    monkeypatch.setattr(loop, "train_update", paced_update)
    monkeypatch.setattr(tasks, "translate", slow_translate)
    monkeypatch.setattr(recipe, "update_seconds", lambda *args, **kwargs: 0.1)
    tc = budget_config(numbers_data, tmp_path / "run", max_minutes=1.0, **settings)
    began = clock.now
    result = train(tc, progress=False)
    assert result.stopped_by == "max_minutes" and clock.now - began <= 60.0
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    return result, records


def test_validation_keeps_to_a_tenth_of_the_budget_on_sentences_that_compare(
    numbers_data, tmp_path, monkeypatch
):
    """The 100 sentences asked for would take 5 s an evaluation, twice a validation (the
    weights and their average): a sixth of the budget each time."""
    result, records = slow_run(numbers_data, tmp_path, monkeypatch, eval_sentences=100)
    validations = [r for r in records if "valid_chrf" in r]
    spent = Ledger.read(tmp_path / "run")
    assert spent.seconds["validation"] <= 0.1 * 60 + 0.5 and len(validations) >= 2
    counts = [r.get("valid_sentences", 100) for r in validations]
    assert counts[0] < 100 and counts == sorted(counts, reverse=True)  # fewer, never more
    assert len(set(counts[1:])) <= 1  # after the first, one count: the figures compare
    for record in validations:  # the weights and their average on the same sentences
        assert record.get("ema_valid_sentences") == record.get("last_valid_sentences")
    assert validations[-1]["step"] == result.step


class Quiet:
    """The progress bar's and the processes' stand-ins for `Pacing` alone."""

    is_main = True

    def __init__(self) -> None:
        self.lines = []

    def write(self, line, file=None):
        self.lines.append(line)

    def any(self, flag):
        return bool(flag)


def test_a_validation_in_the_last_seconds_is_skipped_and_the_run_trains_on(tmp_path):
    pacing = Pacing()
    pacing.state = SimpleNamespace(step=100, elapsed_seconds=10.0, next_eval=None)
    pacing.plan = SimpleNamespace(eval_every=50)
    pacing.closing = Closing(validate=3.0, save=0.5)
    pacing.dist, pacing.run_dir, pacing.max_seconds = Quiet(), tmp_path, 60.0
    pacing.first, pacing.skipped_eval = (0, 0.0), None  # the pace: the time over 100 updates
    bar = Quiet()
    assert not pacing.out_of_time(bar) and pacing.validates_at(100)  # 50 s left: validate
    pacing.state.elapsed_seconds = 55.0  # 5 s left: the end (3.5 s) fits, one more does not
    assert not pacing.out_of_time(bar)
    assert pacing.skipped_eval == 100 and not pacing.validates_at(100)
    assert "validation at step 100 skipped" in bar.lines[0]
    record = json.loads((tmp_path / "metrics.jsonl").read_text())
    assert record == {
        "step": 100,
        "skipped_validation": {"seconds_left": 5.0, "reason": "deadline"},
    }
    pacing.state.elapsed_seconds = 57.0  # 3 s left: not even the end's validation and save
    assert pacing.out_of_time(bar)


def test_the_end_keeps_the_validations_loss_and_a_bounded_share_for_its_decoding():
    pacing = Pacing()
    pacing.max_seconds, pacing.decoding = 300.0, 0.9  # 90% of the latest validation decoded
    # an untrained model's first validation: 15 s, 13.5 of them decoding to the length limit
    assert pacing.end_validation(15.0) == pytest.approx(1.5 + 0.0125 * 300)
    assert pacing.end_validation(2.0) == pytest.approx(2.0)  # a short one is kept whole
    pacing.max_seconds = float("inf")  # no budget: nothing to bound
    assert pacing.end_validation(15.0) == pytest.approx(15.0)
    assert Closing(validate=15.0, save=0.5, calibrating=True, final=5.25).end() == 11.0
