"""Print the CPU (its PyTorch capability and bf16 support), usable cores, CUDA and MPS devices,
versions, and the device, precision and thread count that `auto` picks here, with the reason for
each. Paste it into bug reports."""

from __future__ import annotations

import argparse
import json

from vaswani.device import environment

HELP = "show the hardware as vaswani sees it and what --precision/--device auto pick"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print it as JSON")


def run(args: argparse.Namespace) -> int:
    from vaswani.train.recipe import BF16_MARGIN  # the training side: imported where it is used

    report = environment()
    auto = report["auto"]
    if auto["device"] == "cpu" and auto["precision"] == "bf16":  # what `train` does with it
        auto["precision_reason"] += (
            "; `train` times its model in bf16 and in fp32 and keeps bf16 only where it is "
            f"{BF16_MARGIN:g}x the faster"
        )
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    auto = report.pop("auto")
    width = max(map(len, report))
    for key, value in report.items():
        if isinstance(value, list):
            value = ", ".join(map(str, value)) or "none"
        print(f"{key:<{width}}  {value}")
    print("auto picks:")
    for what in ("device", "precision", "threads"):
        print(f"  {what:<9}  {auto[what]} ({auto[what + '_reason']})")
    return 0
