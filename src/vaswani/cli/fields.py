"""Flags made from a settings dataclass (`TrainConfig`, `DecodeConfig`, `ServeSettings`): each
flag's name, type, choices, default and help come from its field and the docstring written under
the field, so a setting is described once, where Python users read it too."""

from __future__ import annotations

import argparse
import ast
import dataclasses
import functools
import inspect
import re
import textwrap
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from vaswani.errors import ConfigError
from vaswani.tasks import TASK_NAMES
from vaswani.train.schedule import SCHEDULE_NAMES

REGISTRIES = {"task": TASK_NAMES, "schedule": SCHEDULE_NAMES}
"""Choices of fields named here that come from a registry the settings cannot import (the tasks
are defined above the settings)."""


@functools.cache
def field_docs(cls: type) -> dict[str, str]:
    """The docstring under each field of dataclass `cls` (and of its dataclass bases), as one
    line: the string literal that follows `name: type = default` in the class body."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for node, after in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(after, ast.Expr)
                and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                docs[node.target.id] = " ".join(after.value.value.split())
    return docs


PARSERS: dict[str, Any] = {"int": int, "float": float, "Path": Path}


def or_auto(parse: Any) -> Any:
    """A flag parser that also takes "auto" for a setting whose None means "decided for you"."""

    def parser(text: str) -> Any:
        return None if text == "auto" else parse(text)

    parser.__name__ = parse.__name__  # argparse names the type in its error messages
    return parser


METAVARS = {"int": "N", "float": "X", "Path": "PATH"}


def flag_of(name: str) -> str:
    return "--" + name.replace("_", "-")


def add_field_flags(
    parser: argparse.ArgumentParser | Any,
    cls: type,
    names: Iterable[str],
    *,
    flags: dict[str, str] | None = None,
    defaults: dict[str, Any] | None = None,
    unset: bool = False,
    notes: dict[str, str] | None = None,
) -> None:
    """One flag per field in `names`, stored under the field's name.

    flags: a flag name other than `--field-name` (kept where the command had it before);
    defaults: a default other than the field's; unset: every flag defaults to None (the
    dataclass, or a preset, decides) and its help says what that gives.
    A bool field that defaults to true becomes --X / --no-X.
    """
    fields = {f.name: f for f in dataclasses.fields(cls)}
    docs = field_docs(cls)
    for name in names:
        field = fields[name]
        default = (defaults or {}).get(name, field.default)
        if default is dataclasses.MISSING:
            default = None
        help_text = " ".join((docs.get(name, ""), (notes or {}).get(name, ""))).strip()
        help_text = help_text.replace("%", "%%")  # argparse formats help with %
        kinds = field.type.split(" | ")
        options: dict[str, Any] = {"dest": name, "help": help_text}
        if "bool" in kinds:
            options["action"] = argparse.BooleanOptionalAction if default else "store_true"
        elif field.metadata.get("choices") or name in REGISTRIES:
            options["choices"] = field.metadata.get("choices") or REGISTRIES[name]
        else:
            options["type"] = PARSERS.get(kinds[0], str)
            if "None" in kinds and kinds[0] in ("int", "float"):
                options["type"] = or_auto(options["type"])
            options["metavar"] = METAVARS.get(kinds[0], name.upper())
        if unset and "bool" not in kinds:
            options["default"] = None
            if default is not None:
                options["help"] = f"{help_text} (default: {default})".lstrip()
        else:
            options["default"] = default
        parser.add_argument((flags or {}).get(name, flag_of(name)), **options)


def given(args: argparse.Namespace, names: Iterable[str]) -> dict[str, Any]:
    """The values of the flags in `names` that were set (not None): keyword arguments for the
    dataclass, which checks them."""
    return {name: getattr(args, name) for name in names if getattr(args, name, None) is not None}


def settings_from(
    cls: type,
    args: argparse.Namespace,
    names: Iterable[str],
    flags: dict[str, str] | None = None,
    **extra: Any,
) -> Any:
    """`cls` made from the flags in `names` that were set, and `extra`. A value the dataclass
    refuses is a CliError that starts with the flag, since that is what the user typed."""
    names = tuple(names)
    try:
        return cls(**given(args, names), **extra)
    except ConfigError as error:
        # The field the message speaks of first.
        found = [(m.start(), n) for n in names if (m := re.search(rf"\b{n}\b", str(error)))]
        if not found:
            raise
        field = min(found)[1]
        raise ConfigError(f"{(flags or {}).get(field, flag_of(field))}: {error}") from None
