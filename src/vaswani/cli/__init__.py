"""The `vaswani` command: one module per subcommand, each a thin layer that parses flags, calls
the Python API and prints.

A command module has a docstring (its --help description), HELP (its line in `vaswani --help`),
`add_arguments(parser)` and `run(args) -> exit status`. To add a command, write such a module and
list it in COMMANDS. A command imports what only it needs (the training loop, the web
server, matplotlib) inside `run`, so that `vaswani translate` starts without them. `main` is the one error boundary: a `VaswaniError` or an OSError prints one
line and exits with status 2; anything else is reported as a bug (status 3).
"""

from __future__ import annotations

import os
import re
import sys
import traceback

from vaswani import __version__
from vaswani.cli import (
    average,
    backtranslate,
    calibrate,
    classify,
    demo,
    distill,
    env,
    evaluate,
    export,
    generate,
    import_hf,
    keys,
    plot,
    prepare,
    presets,
    runs,
    serve,
    shortlist,
    suggestions,
    train,
    translate,
)
from vaswani.cli.common import HelpFormatter, warnings_as_lines
from vaswani.cli.config_file import SettingsParser, add_config_flags, expand_config
from vaswani.errors import VaswaniError

COMMANDS = {
    "presets": presets,
    "env": env,
    "prepare": prepare,
    "train": train,
    "translate": translate,
    "evaluate": evaluate,
    "calibrate": calibrate,
    "backtranslate": backtranslate,
    "distill": distill,
    "generate": generate,
    "classify": classify,
    "serve": serve,
    "keys": keys,
    "suggestions": suggestions,
    "plot": plot,
    "runs": runs,
    "average": average,
    "import-hf": import_hf,
    "export": export,
    "shortlist": shortlist,
    "demo": demo,
}
CONFIG_COMMANDS = ("train", "prepare")
ALIASES = {
    "import-hf": ["import-marian"]
}  # the name it had when it read Marian models only  # those that take --config FILE and --print-config


def build_parser() -> SettingsParser:
    parser = SettingsParser(
        prog="vaswani",
        description='The Transformer of "Attention Is All You Need": train, translate, inspect.',
        formatter_class=HelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument("--version", action="version", version=f"vaswani {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=SettingsParser
    )
    for name, command in COMMANDS.items():
        command_parser = sub.add_parser(
            name,
            aliases=ALIASES.get(name, []),
            help=command.HELP,
            description=command.__doc__,
            formatter_class=HelpFormatter,
            allow_abbrev=False,  # `--max-len 1` must not be taken as --max-length-ratio 1
        )
        command.add_arguments(command_parser)
        if name in CONFIG_COMMANDS:
            add_config_flags(command_parser)
        command_parser.set_defaults(run=command.run)
        parser.commands[name] = command_parser
    return parser


def with_config(parser: SettingsParser, argv: list[str]) -> list[str]:
    """`argv` with a command's `--config FILE` turned into the flags it stands for."""
    if not argv or argv[0] not in CONFIG_COMMANDS:
        return argv
    return [argv[0], *expand_config(parser.commands[argv[0]], argv[1:])]


def os_error_line(error: OSError) -> str:
    """An OSError as one line naming the file: `out/x: Permission denied`."""
    where = error.filename if error.filename is not None else ""
    if error.filename2 is not None:
        where = f"{where} -> {error.filename2}"
    reason = error.strerror or str(error)
    return f"{where}: {reason}" if where else reason


def undecodable_argument(argv: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python keeps such bytes as lone surrogates)."""
    for i, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            return f"argument {i} ({arg.encode('utf-8', 'replace').decode()!r}) is not valid UTF-8"
    return None


BUG = (
    "error: this is a bug in vaswani {version}, not something you did wrong; please report it on "
    "the project's issue tracker with the traceback above and the output of `vaswani env`"
)


FLAGS = {
    "Request.target": "--target",
    "Request.language": "--source-lang",
    "Request.too_long='truncate'": "--too-long truncate",
    "Protection.patterns": "--protect",
    "the model setting ": "--model ",
    "the pairs entry ": "--pair ",
    "the weights entry ": "--weight ",
    "pairs=": "--pair ",
}
"""The library's words for a setting (its errors name the field a Python user sets), and the
flag that sets it, which the command line's errors name instead."""


SETTING = re.compile(r"\b([a-z][a-z0-9_]*)=(?:'([^']*)'|\"([^\"]*)\"|([\w.:/~+-]+(?:,\d{3})*))")
"""A setting as the library names it, its value quoted or not (`quantize='int8'`,
`accumulate=3`, `shortlist=True`)."""


def in_flags(error: Exception, flags: frozenset[str]) -> str:
    """An error's message in the command line's words: each setting the library names as a
    Python user sets it (`accumulate=3`, `precision='fp32'`, `Request.target`) named by its flag
    (`--accumulate 3`, `--precision fp32`, `--target`), where `flags` has one of that name."""
    message = str(error)
    for words, flag in FLAGS.items():
        message = message.replace(words, flag)

    def flag_of(setting: re.Match) -> str:
        flag = "--" + setting[1].replace("_", "-")
        if flag not in flags:
            return setting[0]
        value = next(v for v in setting.groups()[1:] if v is not None)
        return flag if value == "True" else f"{flag} {value}"

    return SETTING.sub(flag_of, message)


def flags_of(parser: SettingsParser) -> frozenset[str]:
    """Every long flag of every command."""
    return frozenset(
        option
        for command in parser.commands.values()
        for action in command._actions
        for option in action.option_strings
        if option.startswith("--")
    )


def main(argv: list[str] | None = None) -> int:
    """Run one subcommand. Exit status: 0 done, 1 the demo missed its accuracy target, 2 an error
    the user can fix (one line on stderr), 3 a bug in vaswani (a traceback and where to report it),
    130 interrupted."""
    argv = sys.argv[1:] if argv is None else argv
    problem = undecodable_argument(argv)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    parser = build_parser()
    try:
        argv = with_config(parser, argv)
    except VaswaniError as error:
        print(f"error: {in_flags(error, flags_of(parser))}", file=sys.stderr)
        return 2
    args = parser.parse_args(argv)
    try:
        with warnings_as_lines():
            return args.run(args)
    except VaswaniError as error:
        print(f"error: {in_flags(error, flags_of(parser))}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # stdout closed early (`vaswani translate ... | head -1`): not an error
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as error:  # permission denied, a directory where a file belongs, disk full, ...
        print(f"error: {os_error_line(error)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except Exception:
        traceback.print_exc()
        print(BUG.format(version=__version__), file=sys.stderr)
        return 3
