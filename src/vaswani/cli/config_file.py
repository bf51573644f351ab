"""`--config FILE` and `--print-config` for `vaswani train` and `vaswani prepare`.

A config file is flat YAML, one key per flag, named as the flag with underscores
(`batch_tokens: 2048`, `max_minutes: 20`, `data: data/ding`); `model:` is a mapping for the
`--model KEY=VALUE` overrides, `exclude:`/`weight:` lists, `inputs:` prepare's corpora. The keys and
their meaning come from the command's own flags (which come from the dataclass fields and their
docstrings), so the file and the flags cannot drift apart. The file is turned into flags placed
before the command line's, and parsed with them: a value is checked exactly as a flag's is, and a
flag given on the command line wins (for lists, adds). A null value is the same as no key.

The command's parser is a `SettingsParser`, which keeps every argument it is given (`settings`),
so nothing here reads argparse's internals. The same YAML is loaded without the command line by
`TrainConfig.from_file` and `PrepareOptions.from_file` (`vaswani.config.settings_files`).
"""

from __future__ import annotations

import argparse
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vaswani.config.settings_files import ConfigFileError, read_settings, unknown_key

NOT_SETTINGS = {"help", "config", "print_config", "force", "resume", "reset_data_position"}
LIST, SWITCH, NEGATABLE = "list", "switch", "negatable"


class SettingsParser(argparse.ArgumentParser):
    """An ArgumentParser that keeps what each argument is, for config files: its action and how
    its value is written (`kinds`: a list, an on-switch, a --X/--no-X pair, or one value)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.arguments: list[argparse.Action] = []  # before argparse's own add_argument("-h")
        self.kinds: dict[str, str] = {}
        self.commands: dict[str, SettingsParser] = {}  # the subcommands' parsers, by name
        super().__init__(*args, **kwargs)

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action:
        action = super().add_argument(*args, **kwargs)
        self.arguments.append(action)
        how = kwargs.get("action")
        if how == "append" or not action.option_strings:
            self.kinds[action.dest] = LIST
        elif how == "store_true":
            self.kinds[action.dest] = SWITCH
        elif how is argparse.BooleanOptionalAction:
            self.kinds[action.dest] = NEGATABLE
        return action


def settings(parser: SettingsParser) -> dict[str, argparse.Action]:
    """The command's settings a config file may hold, by key (the flag's destination)."""
    return {
        action.dest: action
        for action in parser.arguments
        if action.dest not in NOT_SETTINGS and action.dest != argparse.SUPPRESS
    }


def add_config_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="read settings from this YAML file (one key per flag: batch_tokens: 2048); flags "
        "given here override it",
    )
    parser.add_argument(
        "--print-config",
        action=PrintConfig,
        help="print a commented template with every key and its default, and exit",
    )


class PrintConfig(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(template(parser), end="")
        parser.exit()


def yaml_value(value: Any) -> str:
    import yaml

    if isinstance(value, Path):
        value = str(value)
    return (
        yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip().removesuffix("\n...")
    )


def template(parser: SettingsParser) -> str:
    """Every key with its help as a comment and its default as the value (null: decided by the
    preset or the data, as the help says)."""
    lines = [
        f"# {parser.prog} settings: {parser.prog} --config FILE. Flags given on the command",
        "# line override the file; a null value is the same as leaving the key out.",
        "",
    ]
    for key, action in settings(parser).items():
        help_text = (action.help or "").replace("%%", "%")
        if key == "model":
            help_text = "Model settings over the preset's, a mapping: {norm: pre, d_ff: 2048}."
        if action.choices:
            help_text += f" One of: {', '.join(map(str, action.choices))}."
        lines += [f"# {line}" for line in textwrap.wrap(help_text, 96)]
        default = action.default
        if key == "model":
            default = {}
        elif parser.kinds.get(key) == LIST:
            default = []
        lines += [f"{key}: {yaml_value(default)}", ""]
    return "\n".join(lines)


def config_argv(parser: SettingsParser, path: Path) -> tuple[list[str], list[str]]:
    """The flags and the positional values a config file stands for."""
    data = read_settings(path)
    known = settings(parser)
    flags: list[str] = []
    positional: list[str] = []
    for key, value in data.items():
        if key not in known:
            raise unknown_key(path, key, list(known))
        if value is None:
            continue
        tokens = flag_tokens(known[key], parser.kinds.get(key), key, value, path)
        if known[key].option_strings:
            flags += tokens
        else:
            positional += tokens
    return flags, positional


def list_tokens(flag: str | None, value: Any, wrong: Callable[[str], Exception]) -> list[str]:
    """The tokens of a list value: `flag=item` each, or the items of a positional argument."""
    if not isinstance(value, list) or any(isinstance(v, dict | list) for v in value):
        raise wrong("a list")
    items = [str(v) for v in value]
    if flag is None and any(item.startswith("-") for item in items):
        # A value read as a flag would let a file switch on actions (--force): refused.
        raise wrong("file names (one starting with '-' is read as a flag: write ./-NAME)")
    return items if flag is None else [f"{flag}={item}" for item in items]


def flag_tokens(
    action: argparse.Action, kind: str | None, key: str, value: Any, path: Path
) -> list[str]:
    """The command-line tokens that set `key` (its `action`, of `SettingsParser.kinds` `kind`)
    to `value`, checked as a flag's."""

    def wrong(expected: str) -> ConfigFileError:
        return ConfigFileError(f"{path}: {key}: expected {expected}, found {value!r}")

    flag = action.option_strings[0] if action.option_strings else None
    if kind in (SWITCH, NEGATABLE):
        if not isinstance(value, bool):
            raise wrong("true or false")
        if kind == SWITCH:
            return [flag] if value else []
        return [flag if value else action.option_strings[1]]
    if key == "model":
        if not isinstance(value, dict):
            raise wrong("a mapping of model settings (d_ff: 2048)")
        return [f"{flag}={item}={setting}" for item, setting in value.items()]
    if kind == LIST:
        return list_tokens(flag, value, wrong)
    if isinstance(value, dict | list) or (isinstance(value, bool) and action.type is not None):
        raise wrong("one value")
    text = str(value)
    if action.type is not None:
        try:
            action.type(text)
        except (ValueError, TypeError, argparse.ArgumentTypeError):
            raise wrong(getattr(action, "metavar", None) or "another value") from None
    if action.choices is not None and text not in map(str, action.choices):
        raise wrong(f"one of {', '.join(map(str, action.choices))}")
    return [f"{flag}={text}"]  # one token: a value such as "--force" stays a value


def expand_config(parser: SettingsParser, argv: list[str]) -> list[str]:
    """`argv` (a command's arguments) with `--config FILE` replaced by the flags it stands for,
    placed first so that the command line's own flags override them; positional values of the
    file are used only when the command line gives none."""
    probe = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    probe.add_argument("--config", type=Path)
    found, rest = probe.parse_known_args(argv)
    if found.config is None:
        return argv
    flags, positional = config_argv(parser, found.config)
    given = settings(parser)
    # Positional values on the command line: what a parse without the file's leaves in them.
    own = parser.parse_known_args(rest)[0]
    has_positional = any(
        getattr(own, key, None) for key, a in given.items() if not a.option_strings
    )
    return [*flags, *rest, *([] if has_positional else positional)]
