"""Device, precision and thread choice: `auto` from the hardware, with the hardware faked."""

import json

import pytest
import torch

from helpers import cli
from vaswani import device as dev
from vaswani.device import DeviceError, Hardware, pick_device, pick_precision, place

CPU = torch.device("cpu")
AVX2 = Hardware(cpu_capability="AVX2", cpu_flags=frozenset({"avx2", "fma"}), cores=2, busy=0.0)
SAPPHIRE = Hardware(
    cpu_capability="AVX512",
    cpu_flags=frozenset({"avx2", "avx512f", "avx512_bf16", "amx_bf16", "amx_tile"}),
    cores=8,
)
A100 = Hardware(cpu_capability="AVX2", cuda=(("NVIDIA A100", (8, 0)),), cores=8)
T4 = Hardware(cpu_capability="AVX2", cuda=(("Tesla T4", (7, 5)), ("Tesla T4", (7, 5))))
MAC = Hardware(cpu_capability="DEFAULT", mps=True, cores=8)


def never(*_):
    raise AssertionError("the probe must not run here")


def test_an_avx2_cpu_runs_fp32_without_probing():
    precision, reason = pick_precision("auto", CPU, AVX2, probe=never)
    assert (precision, reason) == ("fp32", "auto: this CPU has no native bf16, AVX2")


def test_a_cpu_with_avx512_bf16_runs_bf16_when_the_probe_confirms_it():
    precision, reason = pick_precision("auto", CPU, SAPPHIRE, probe=lambda: True)
    assert precision == "bf16"
    assert "natively (avx512_bf16, amx_bf16)" in reason


def test_a_probe_that_finds_bf16_slow_overrules_the_flags():
    precision, reason = pick_precision("auto", CPU, SAPPHIRE, probe=lambda: False)
    assert precision == "fp32" and "slower than fp32" in reason


@pytest.mark.parametrize(
    ("hardware", "why"),
    [
        (Hardware(cpu_capability="AVX2", cpu_flags=SAPPHIRE.cpu_flags), "runs this CPU at AVX2"),
        (
            Hardware(cpu_capability="AVX512", cpu_flags=SAPPHIRE.cpu_flags, onednn_max_isa="avx2"),
            "ONEDNN_MAX_CPU_ISA=avx2",
        ),
    ],
)
def test_lowered_isa_settings_turn_native_bf16_off(hardware, why):
    precision, reason = pick_precision("auto", CPU, hardware, probe=never)
    assert precision == "fp32" and why in reason


def test_gpus_with_bf16_get_bf16_and_older_ones_fp16():
    assert pick_precision("auto", torch.device("cuda"), A100)[0] == "bf16"
    precision, reason = pick_precision("auto", torch.device("cuda:1"), T4)
    assert precision == "fp16" and "compute capability 7.5 < 8.0" in reason


def test_mps_runs_fp32_and_explicit_choices_are_kept():
    assert pick_precision("auto", torch.device("mps"), MAC)[0] == "fp32"
    for name in ("bf16", "fp16", "fp32"):
        assert pick_precision(name, CPU, AVX2, probe=never) == (name, "as asked")
    with pytest.raises(DeviceError, match="choose one of auto, bf16, fp16, fp32"):
        pick_precision("fp8", CPU, AVX2)


def test_auto_device_prefers_cuda_then_mps_then_cpu():
    assert pick_device("auto", A100)[0] == torch.device("cuda")
    assert pick_device("auto", MAC) == (
        torch.device("mps"),
        "auto: Apple GPU (MPS), no CUDA device",
    )
    assert pick_device("auto", AVX2) == (torch.device("cpu"), "auto: no CUDA or MPS device")


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("cuda", "no CUDA device is available"),
        ("mps", "MPS .* is not available"),
        ("meta", "runs on cpu, cuda or mps"),
        ("gpu0", "not a device name"),
    ],
)
def test_devices_the_machine_lacks_are_refused_in_one_line(name, message):
    with pytest.raises(DeviceError, match=message):
        pick_device(name, AVX2)


def test_a_cuda_index_past_the_devices_is_refused():
    assert pick_device("cuda:1", T4)[0] == torch.device("cuda:1")
    with pytest.raises(DeviceError, match=r"2 CUDA device\(s\), cuda:0 .. cuda:1"):
        pick_device("cuda:2", T4)


def test_threads_follow_the_usable_cores_unless_omp_num_threads_is_set(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        assert dev.set_threads(1, Hardware(cpu_capability="AVX2", cores=3, busy=0.0))[0] == 3
        assert torch.get_num_threads() == 3
        threads, why = dev.set_threads(2, Hardware(cpu_capability="AVX2", cores=3))
        assert threads == 1 and "shared by 2 processes" in why
        monkeypatch.setenv("OMP_NUM_THREADS", "1")
        assert dev.set_threads(1, AVX2) == (torch.get_num_threads(), "OMP_NUM_THREADS")
    finally:
        torch.set_num_threads(before)


def test_threads_leave_the_cores_other_processes_keep_busy(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    try:
        threads, why = dev.set_threads(1, Hardware(cpu_capability="AVX2", cores=4, busy=1.2))
        assert threads == 3 and "1.2 of them busy with other processes" in why
        assert dev.set_threads(1, Hardware(cpu_capability="AVX2", cores=2, busy=2.0))[0] == 1
        assert dev.set_threads(1, Hardware(cpu_capability="AVX2", cores=2, busy=0.3))[0] == 2
        # processes of one run share the cores evenly; a count asked for is kept
        assert dev.set_threads(2, Hardware(cpu_capability="AVX2", cores=4, busy=2.0))[0] == 2
        assert dev.set_threads(1, Hardware(cpu_capability="AVX2", cores=4, busy=3.0), 4)[0] == 4
    finally:
        torch.set_num_threads(before)


def test_the_load_is_read_from_proc_stat(monkeypatch):
    stats = iter(
        [
            "cpu  0 0 0 0 0 0 0 0\ncpu0 100 0 0 900 0 0 0 0\ncpu1 100 0 0 900 0 0 0 0\n",
            # cpu0 busy the whole time (10% of it stolen), cpu1 idle
            "cpu  0 0 0 0 0 0 0 0\ncpu0 190 0 0 900 0 0 0 10\ncpu1 100 0 0 1000 0 0 0 0\n",
        ]
    )
    monkeypatch.setattr(dev, "_cpu_times", lambda: dev._parsed(next(stats)))
    monkeypatch.setattr(dev, "_affinity", lambda: {0, 1})
    load = dev.Load.read(0.0)
    assert load.busy == 1.0 and load.steal == pytest.approx(10 / 200)


def test_the_usable_cores_are_the_affinity_mask():
    import os

    assert dev.usable_cores() == len(os.sched_getaffinity(0))


def test_placement_says_its_choice_in_one_line_each(monkeypatch):
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)  # `pytest -n 2` sets it
    try:
        placement = place("auto", "auto", hw=AVX2)
    finally:
        torch.set_num_threads(before)
    assert placement.lines()[1] == "precision: fp32 (auto: this CPU has no native bf16, AVX2)"
    assert placement.lines()[0].startswith(
        f"device: cpu (auto: no CUDA or MPS device), {AVX2.cores} threads"
    )


def test_autocast_and_scaler_follow_the_precision():
    x = torch.randn(4, 4)
    with dev.autocast(CPU, "bf16"):
        assert (x @ x).dtype == torch.bfloat16
    with dev.autocast(CPU, "fp32"):
        assert (x @ x).dtype == torch.float32
    assert dev.grad_scaler(CPU, "fp16").is_enabled()
    assert not dev.grad_scaler(CPU, "bf16").is_enabled()


def test_env_says_that_training_times_bf16_against_fp32_on_a_cpu(capsys, monkeypatch):
    report = dev.environment()
    report["auto"].update(device="cpu", precision="bf16", precision_reason="auto: native bf16")
    monkeypatch.setattr("vaswani.cli.env.environment", lambda: report)
    code, out, _ = cli(capsys, "env")
    assert code == 0
    assert "precision  bf16 (auto: native bf16; `train` times its model in bf16 and in fp32" in out


def test_env_reports_the_hardware_and_what_auto_picks(capsys):
    code, out, _ = cli(capsys, "env")
    assert code == 0
    assert f"cpu_capability       {torch.backends.cpu.get_cpu_capability()}" in out
    assert "auto picks:" in out and "precision  fp32 (auto: " in out
    code, out, _ = cli(capsys, "env", "--json")
    report = json.loads(out)
    assert report["auto"]["device"] == "cpu" and report["torch"] == torch.__version__
    # the load it sees: other processes' work on this process's cores, and the steal time
    assert 0.0 <= report["cores_busy"] <= report["cores_usable"] + 0.1
    assert report["cpu_steal"] == "not exposed" or report["cpu_steal"].endswith("%")


def test_a_cuda_placement_leaves_cudnn_attention_out():
    """cuDNN's attention builds a graph for each new shape: on an H100, mini training steps of 40
    batch shapes took 527 ms each with it and 31 ms without (benchmarks/gpu_shapes.py)."""
    was = torch.backends.cuda.cudnn_sdp_enabled()
    try:
        torch.backends.cuda.enable_cudnn_sdp(True)
        place("cpu", "fp32", hw=A100)
        assert torch.backends.cuda.cudnn_sdp_enabled()  # the CPU's placement leaves it alone
        placement = place("auto", "auto", hw=A100)
        assert placement.device.type == "cuda"
        assert not torch.backends.cuda.cudnn_sdp_enabled()
    finally:
        torch.backends.cuda.enable_cudnn_sdp(was)


@pytest.mark.skipif(not dev.glibc(), reason="glibc only")
def test_glibc_takes_the_setting_to_keep_freed_memory():
    """mallopt(3) refuses a threshold above its limit; the setting itself is measured in
    docs/training.md (its page faults vary from run to run with the threads' timing)."""
    assert dev.keep_freed_memory()
