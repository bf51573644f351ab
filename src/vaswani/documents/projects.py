"""A project's folder of resource files translated at once (`translate --input-dir res/
--output-dir res-es/`): which files of the tree are read (`project_files`), and where each one's
translation goes in the mirrored tree (`mirrored`), named as its platform names a language's
files:

- Android: `values/strings.xml` -> `values-es/strings.xml` (`values-pt-rBR/`, `values-b+zh+Hans/`
  for a region or script; a `values-en/` of the source language renamed; other qualifiers kept
  after the language: `values-night/` -> `values-es-night/`);
- Apple: `en.lproj/` or `Base.lproj/` -> `es.lproj/`;
- a folder or a file named by the source language: `locales/en/app.json` -> `locales/es/app.json`,
  `en.yml` -> `es.yml`, `messages_en.properties` -> `messages_es.properties`,
  `app_en.arb` -> `app_es.arb`;
- a file beside its translations named by a suffix (Jitsi's `lang/main.json` beside
  `main-de.json`): `main-es.json`;
- JSON, YAML and Android XML only where their place says they are the source's strings (other
  such files of a project, package.json or a layout, are left out), and .properties only where
  its name or folder says it is a message bundle (not gradle.properties);
- otherwise a format's own convention where it has one: `messages.properties` ->
  `messages_es.properties` (Java), `app.arb` -> `app_es.arb` (Flutter), `app.ts` -> `app_es.ts`
  (Qt), `Strings.resx` -> `Strings.es.resx` (.NET); any other file keeps its name.
"""

from __future__ import annotations

import os
import re
from pathlib import Path, PurePath

from vaswani.documents.formats import FORMATS, REGISTRY, DocumentError
from vaswani.languages import Language, language_matches

MAX_FILES = 10_000
"""The most files of a tree read at once."""


def project_files(root: Path) -> tuple[list[Path], list[tuple[Path, str]]]:
    """The files under `root` of formats vaswani reads, in order, and the others (left out),
    each with why; links are not followed (a link may lead out of the tree, or round in a
    loop)."""
    if not root.is_dir():
        raise DocumentError(f"--input-dir {root}: not a directory")
    read, other = [], []
    for folder, dirs, files in os.walk(root, followlinks=False):
        dirs.sort()
        for name in sorted(files):
            path = Path(folder) / name
            if path.is_symlink() or not path.is_file():
                other.append((path, "a link, or not a regular file"))
            elif path.suffix.lower() in FORMATS:
                read.append(path)
            else:
                other.append((path, f"not a format vaswani reads ({path.suffix or 'no suffix'})"))
            if len(read) + len(other) > MAX_FILES:
                raise DocumentError(f"--input-dir {root}: over {MAX_FILES:,} files; too many")
    return read, other


def mirrored(
    relative: PurePath,
    fmt: str,
    source: str | None,
    target: str,
    siblings: frozenset[str] = frozenset(),
) -> PurePath | None:
    """Where the translation of the file at `relative` (to the tree's root) goes, relative to
    the output tree, for `target` (`source`: the source language, None where unknown); None
    for a file of another language (`values-de/`, `fr.lproj/`, `locales/it/`, `de.yml`), which
    is not a source to translate (`placed` says why). `siblings`: the names of the files in its
    folder (`main.json` beside `main-de.json` is the source, its translation `main-fr.json`)."""
    return placed(relative, fmt, source, target, siblings)[0]


def placed(
    relative: PurePath,
    fmt: str,
    source: str | None,
    target: str,
    siblings: frozenset[str] = frozenset(),
) -> tuple[PurePath | None, str]:
    """`mirrored`'s place, and where it is None, why the file is left out."""
    folders = [_folder(part, source, target) for part in relative.parts[:-1]]
    if None in folders:
        return None, "in another language's folder"
    renamed = folders != list(relative.parts[:-1])
    stem, suffix = relative.stem, relative.suffix
    named = re.fullmatch(r"(?:(.*[_.-]))?([a-z]{2,3}(?:[-_][A-Za-z0-9]{2,8})?)", stem)
    if named and _code(named[2], source):
        if source is None or not _same(named[2], source):
            return None, "named by another language (or the source language is unknown)"
        return PurePath(*folders, (named[1] or "") + _file_code(target, fmt) + suffix), ""
    separator = _beside(stem, suffix, siblings)
    if separator is not None:  # main.json beside main-de.json: the source's
        return PurePath(*folders, f"{stem}{separator}{_file_code(target, fmt)}{suffix}"), ""
    record = REGISTRY[fmt]
    if not renamed and record.marked:  # a package.json, a layout: not the source's strings
        return None, f"{fmt} not in a language's place (values/, locales/en/, en.yml, main-de.json)"
    if record.bundle and not any(re.search(record.bundle, p, re.I) for p in relative.parts):
        return None, f"a {suffix} file that names no message bundle (a build's settings)"
    name = relative.name
    if not renamed and record.suffix is not None:
        name = f"{stem}{record.suffix}{_file_code(target, fmt)}{suffix}"
    return PurePath(*folders, name), ""


def _beside(stem: str, suffix: str, siblings: frozenset[str]) -> str | None:
    """The separator of the language files beside `stem`+`suffix` (`main-de.json` and
    `main-fr.json` beside `main.json`: "-"), None where there are none."""
    pattern = re.compile(
        rf"{re.escape(stem)}([-_.])([a-z]{{2,3}}(?:[-_][A-Za-z0-9]{{2,8}})?){re.escape(suffix)}"
    )
    for name in sorted(siblings):
        found = pattern.fullmatch(name)
        if found and _language(found[2]):
            return found[1]
    return None


def _file_code(language: str, fmt: str) -> str:
    """A language as a format's file names write it: Java, Flutter and Qt `pt_BR`."""
    posix = REGISTRY[fmt].suffix == "_"
    return Language.parse(language).spelt("posix") if posix else language


def _code(name: str, source: str | None) -> bool:
    """Whether a folder or a file's stem is named by a language: a two-letter code CLDR knows
    (`de`, `pt_BR`, `zh-Hans`), or the source's own code; not three letters of another, which
    would take `src` (Sardinian) or `app` for languages."""
    if source is not None and _same(name, source):
        return True
    return bool(re.fullmatch(r"[a-z]{2}(?:[-_][A-Za-z0-9]{2,8})?", name)) and _language(name)


def _language(code: str) -> bool:
    """Whether `code` (`de`, `pt_BR`, `zh-Hans`) names a language CLDR knows."""
    from vaswani.documents.resources import plural_categories

    return plural_categories(code) is not None


def _same(code: str, language: str) -> bool:
    """Whether `code` names `language` in general (`en`, not `en-GB`, names `en` and `en-US`)."""
    return language_matches(language, code)


def _folder(part: str, source: str | None, target: str) -> str | None:
    """A folder's name in the mirrored tree; None for a folder of another language."""
    android = re.fullmatch(r"values((?:-[^-]+)*)", part)
    if android:
        qualifiers = [q for q in android[1].split("-") if q]
        if qualifiers and (_language(qualifiers[0]) or qualifiers[0].startswith("b+")):
            if (
                source is None
                or not _same(qualifiers[0], source)
                or qualifiers[1:2]
                and (qualifiers[1].startswith("r"))
            ):
                return None  # another language's, or a regional variant of the source
            qualifiers = qualifiers[1:]
        return "-".join(["values", android_locale(target), *qualifiers])
    apple = re.fullmatch(r"(.+)\.lproj", part)
    if apple:
        if apple[1] == "Base" or (source is not None and _same(apple[1], source)):
            return f"{target}.lproj"
        return None
    if _code(part, source):
        return target if source is not None and _same(part, source) else None
    return part


def android_locale(language: str) -> str:
    """A language tag as Android's resource qualifier: `es`, `pt-rBR`, `b+zh+Hans`."""
    return Language.parse(language).spelt("android")
