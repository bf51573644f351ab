"""Settings files: the YAML that `--config FILE` reads for `vaswani train` and `vaswani prepare`,
and that `TrainConfig.from_file` and `PrepareOptions.from_file` load in Python, one key per
dataclass field (`batch_tokens: 2048`). YAML is read with a safe loader that refuses a key given
twice and more than a few aliases; a damaged file is one line naming where."""

from __future__ import annotations

import dataclasses
import difflib
import types
import typing
from pathlib import Path
from typing import Any

from vaswani.errors import VaswaniError
from vaswani.safe_io import read_text

MAX_ALIASES = 10  # a settings file needs few; 8 levels of 9 aliases make 9^9 values


class ConfigFileError(VaswaniError, ValueError):
    """A config file vaswani cannot use; the message names the file and the key."""


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


def unknown_key(path: Path, key: Any, known: list[str]) -> ConfigFileError:
    """The error for a key of `path` that is none of `known`, naming the closest one."""
    close = difflib.get_close_matches(str(key), known, n=1)
    hint = f"; did you mean '{close[0]}'?" if close else f"; known keys: {', '.join(known)}"
    return ConfigFileError(f"{path}: unknown key '{key}'{hint}")


def read_settings(path: Path) -> dict[str, Any]:
    """The mapping a settings file holds (empty for an empty file)."""
    import yaml

    text = read_text(Path(path), "config file", limit=1 << 20)
    try:
        data = yaml.load(text, Loader=settings_loader())  # noqa: S506 - a SafeLoader, bounded
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f":{mark.line + 1}:{mark.column + 1}" if mark else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise ConfigFileError(f"{path}{where}: not valid YAML ({problem})") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigFileError(
            f"{path}: should hold a mapping of settings (key: value), found {type(data).__name__}"
        )
    return data


def field_value(annotation: Any, value: Any) -> Any:
    """A YAML value as the field annotated `annotation` holds it: a path from a string, a tuple
    from a list (inner ones too); anything else as it is, for the dataclass's own checks."""
    if value is None:
        return None
    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else ()
    for option in options or (annotation,):
        if option is Path and isinstance(value, str):
            return Path(value)
        if typing.get_origin(option) is tuple and isinstance(value, list):
            inner = typing.get_args(option)[0]
            return tuple(field_value(inner, item) for item in value)
    return value


def load_settings(
    cls: type, path: Path, ignore: tuple[str, ...] = (), overrides: dict | None = None
) -> Any:
    """`cls` (a settings dataclass) from the keys of settings file `path`, then `overrides`; keys
    in `ignore` belong to the command rather than to `cls` and are left out. An unknown key is an
    error that names the closest field."""
    hints = typing.get_type_hints(cls)
    names = [f.name for f in dataclasses.fields(cls)]
    values = {}
    for key, value in read_settings(path).items():
        if key in ignore or value is None:
            continue
        if key not in names:
            raise unknown_key(path, key, names)
        values[key] = field_value(hints[key], value)
    try:
        return cls(**{**values, **(overrides or {})})
    except (TypeError, ValueError) as error:
        raise ConfigFileError(f"{path}: {error}") from None
