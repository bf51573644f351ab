"""The one base class of every failure a user can cause and fix.

A `VaswaniError` is expected: a missing or damaged file, a run directory from elsewhere, a value out
of range, a device this machine lacks. Its message is one line that names the thing (file, field,
flag) and what to do; `vaswani` prints it as `error: ...` and exits with status 2. Anything else
that escapes a command is a bug in vaswani, and the command says so.
"""

from __future__ import annotations


class VaswaniError(Exception):
    """An expected failure; the message names the file, field or flag and the fix."""


class ConfigError(VaswaniError, ValueError):
    """A setting (from a flag, a config file or the Python API) with a wrong type or value."""
