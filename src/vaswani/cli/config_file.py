"""`--config FILE` and `--print-config` for `vaswani train` and `vaswani prepare`.

A config file is flat YAML, one key per flag, named as the flag with underscores
(`batch_tokens: 2048`, `max_minutes: 20`, `data: data/ding`); `model:` is a mapping for the
`--model KEY=VALUE` overrides, `exclude:`/`weight:` lists, `inputs:` prepare's corpora. The keys and
their meaning come from the command's own flags (which come from the dataclass fields and their
docstrings), so the file and the flags cannot drift apart. The file is turned into flags placed
before the command line's, and parsed with them: a value is checked exactly as a flag's is, and a
flag given on the command line wins (for lists, adds). A null value is the same as no key.
"""

from __future__ import annotations

import argparse
import difflib
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vaswani.errors import VaswaniError
from vaswani.files import read_text

NOT_SETTINGS = {"help", "config", "print_config", "force", "resume", "reset_data_position"}


class ConfigFileError(VaswaniError, ValueError):
    """A config file vaswani cannot use; the message names the file and the key."""


def settings(parser: argparse.ArgumentParser) -> dict[str, argparse.Action]:
    """The command's settings a config file may hold, by key (the flag's destination)."""
    return {
        action.dest: action
        for action in parser._actions  # argparse keeps its actions only here
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


def takes_list(action: argparse.Action) -> bool:
    """A repeatable flag (--exclude) or a positional of many values (prepare's corpora)."""
    return isinstance(action, argparse._AppendAction) or not action.option_strings


def yaml_value(value: Any) -> str:
    import yaml

    if isinstance(value, Path):
        value = str(value)
    return (
        yaml.safe_dump(value, default_flow_style=True, width=1 << 16).strip().removesuffix("\n...")
    )


def template(parser: argparse.ArgumentParser) -> str:
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
        elif takes_list(action):
            default = []
        lines += [f"{key}: {yaml_value(default)}", ""]
    return "\n".join(lines)


MAX_ALIASES = 10  # a settings file needs few; 8 levels of 9 aliases make 9^9 values


def settings_loader() -> type:
    """PyYAML's SafeLoader, refusing a key given twice in one mapping (which would silently win)
    and more than MAX_ALIASES aliases (a "billion laughs" file)."""
    import yaml

    class SettingsLoader(yaml.SafeLoader):
        aliases = 0

        def compose_node(self, parent: Any, index: Any) -> Any:
            if self.check_event(yaml.AliasEvent):
                self.aliases += 1
                if self.aliases > MAX_ALIASES:
                    mark = self.peek_event().start_mark
                    problem = f"more than {MAX_ALIASES} aliases (*name)"
                    raise yaml.constructor.ConstructorError(None, None, problem, mark)
            return super().compose_node(parent, index)

        def construct_mapping(self, node: Any, deep: bool = False) -> Any:
            seen: set[str] = set()
            for key_node, _ in node.value:
                key = str(self.construct_object(key_node, deep=True))
                if key in seen:
                    problem = f"the key {key!r} is given twice"
                    raise yaml.constructor.ConstructorError(
                        None, None, problem, key_node.start_mark
                    )
                seen.add(key)
            return super().construct_mapping(node, deep)

    return SettingsLoader


def config_argv(parser: argparse.ArgumentParser, path: Path) -> tuple[list[str], list[str]]:
    """The flags and the positional values a config file stands for."""
    import yaml

    text = read_text(path, "config file")
    try:
        data = yaml.load(text, Loader=settings_loader())  # noqa: S506 - a SafeLoader, bounded
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigFileError(f"{path}{where}: not valid YAML ({problem})") from None
    if data is None:
        return [], []
    if not isinstance(data, dict):
        raise ConfigFileError(
            f"{path}: should hold a mapping of settings (key: value), found {type(data).__name__}"
        )
    known = settings(parser)
    flags: list[str] = []
    positional: list[str] = []
    for key, value in data.items():
        if key not in known:
            close = difflib.get_close_matches(str(key), known, n=1)
            hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(known)}"
            raise ConfigFileError(f"{path}: unknown key '{key}'{hint}")
        if value is None:
            continue
        tokens = flag_tokens(known[key], key, value, path)
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


def flag_tokens(action: argparse.Action, key: str, value: Any, path: Path) -> list[str]:
    """The command-line tokens that set `key` (its `action`) to `value`, checked as a flag's."""

    def wrong(expected: str) -> ConfigFileError:
        return ConfigFileError(f"{path}: {key}: expected {expected}, found {value!r}")

    flag = action.option_strings[0] if action.option_strings else None
    if isinstance(action, argparse.BooleanOptionalAction | argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise wrong("true or false")
        if isinstance(action, argparse._StoreTrueAction):
            return [flag] if value else []
        return [flag if value else action.option_strings[1]]
    if key == "model":
        if not isinstance(value, dict):
            raise wrong("a mapping of model settings (d_ff: 2048)")
        return [f"{flag}={item}={setting}" for item, setting in value.items()]
    if takes_list(action):
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


def expand_config(parser: argparse.ArgumentParser, argv: list[str]) -> list[str]:
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
