"""The thread count of a training run, chosen by measurement (`vaswani.train.threads`)."""

import json

import pytest
import torch

from vaswani.config import TrainConfig
from vaswani.train import threads
from vaswani.train.loop import train
from vaswani.train.threads import SKIPPED, TRIAL_UPDATES, ThreadChoice, candidates


class Machine:
    """A machine on which an update of 1,000 tokens takes `seconds[count]` on `count` threads."""

    def __init__(self, seconds: dict[int, float]):
        self.seconds, self.now = seconds, 0.0

    def update(self, choice: ThreadChoice) -> str | None:
        choice.before()
        took = self.seconds[torch.get_num_threads()]
        self.now += took
        return choice.after(took, 1000)


@pytest.fixture
def keep_threads():
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


def test_candidates_are_all_cores_one_fewer_and_half():
    assert candidates(2) == [2, 1]
    assert candidates(16) == [16, 15, 8]
    assert candidates(1) == [1]


def test_a_trial_takes_turns_and_keeps_the_faster_count_then_rechecks_on_drift_and_time(
    keep_threads,
):
    machine = Machine({2: 0.30, 1: 0.10})  # a busy machine: one thread is three times faster
    choice = ThreadChoice([2, 1], clock=lambda: machine.now, chosen=2)
    said = [machine.update(choice) for _ in range(SKIPPED + 2 * TRIAL_UPDATES)]
    assert said[:-1] == [None] * (len(said) - 1)
    assert said[-1] == "threads: 1 (start; measured 2 threads 3,333 tok/s, 1 thread 10,000 tok/s)"
    assert choice.chosen == 1 and torch.get_num_threads() == 1
    # The pace settles over PACE_WINDOW updates; a third slower is noise, not a drift.
    window = threads.PACE_WINDOW
    machine.seconds = {2: 0.30, 1: 0.13}
    assert [machine.update(choice) for _ in range(2 * window)] == [None] * 2 * window
    # The neighbour leaves: one thread twice as fast, two threads faster still. A trial follows.
    machine.seconds = {2: 0.03, 1: 0.05}
    said = [line for _ in range(window + 2 * TRIAL_UPDATES) if (line := machine.update(choice))]
    assert len(said) == 1 and said[0].startswith("threads: 2 (the pace drifted;")
    assert choice.chosen == 2
    # A steady pace is re-checked after RECHECK_SECONDS all the same; a trial that keeps the
    # count says nothing.
    checked = choice.checked_at
    steps = int(threads.RECHECK_SECONDS / 0.03) + window + 2 * TRIAL_UPDATES
    said = [machine.update(choice) for _ in range(steps)]
    assert said == [None] * steps and choice.checked_at > checked and choice.chosen == 2


def test_another_count_must_be_clearly_faster_to_replace_the_current_one(keep_threads):
    machine = Machine({2: 0.100, 1: 0.095})  # one thread 5% faster: within the noise
    choice = ThreadChoice([2, 1], clock=lambda: machine.now, chosen=2)
    said = [machine.update(choice) for _ in range(SKIPPED + 2 * TRIAL_UPDATES)]
    assert choice.chosen == 2 and said[-1].startswith("threads: 2 (start;")


def test_the_count_stays_as_set_without_a_time_budget_or_when_asked(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    assert ThreadChoice.for_run(cpu=True, timed_budget=True, asked=None).counts == [2, 1]
    assert ThreadChoice.for_run(cpu=True, timed_budget=False, asked=None).counts == []
    assert ThreadChoice.for_run(cpu=True, timed_budget=True, asked=2).counts == []
    assert ThreadChoice.for_run(cpu=False, timed_budget=True, asked=None).counts == []
    assert ThreadChoice.for_run(cpu=True, timed_budget=True, asked=None, processes=2).counts == []
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert ThreadChoice.for_run(cpu=True, timed_budget=True, asked=None).counts == []
    unchanged = torch.get_num_threads()
    ThreadChoice([], chosen=unchanged + 1).before()
    assert torch.get_num_threads() == unchanged


def test_a_timed_run_says_and_logs_its_thread_choice(numbers_data, tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(threads, "usable_cores", lambda: 2)
    tc = TrainConfig(
        data=str(numbers_data),
        out=str(tmp_path / "run"),
        preset="tiny",
        precision="fp32",
        batch_tokens=512,
        max_minutes=1.0,
        eval_every=1000,
        max_steps=SKIPPED + 2 * TRIAL_UPDATES + 2,
        eval_sentences=8,
    )
    train(tc)
    records = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").open()]
    choices = [r for r in records if "threads" in r]
    assert len(choices) == 1 and choices[0]["threads"] in (1, 2)
    assert choices[0]["step"] == SKIPPED + 2 * TRIAL_UPDATES
    assert "threads: " in capsys.readouterr().err


def test_a_resumed_fixed_step_run_keeps_the_thread_count_it_started_with(tmp_path, monkeypatch):
    from vaswani.config import TrainConfig
    from vaswani.train.loop import kept_threads

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    (tmp_path / "environment.json").write_text('{"threads": 1, "device": "cpu"}')
    steps = TrainConfig(data="d", out=str(tmp_path), max_steps=10)
    assert kept_threads(steps) == 1  # chosen from the load at its start: kept, bit for bit
    assert kept_threads(TrainConfig(data="d", out=str(tmp_path), max_minutes=1.0)) is None
    assert kept_threads(TrainConfig(data="d", out=str(tmp_path), max_steps=10, threads=2)) is None
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    assert kept_threads(steps) is None
    (tmp_path / "environment.json").write_text("[1]")
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert kept_threads(steps) is None
