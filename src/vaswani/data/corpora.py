"""Parallel text: streaming readers for files, and the built-in corpora.

Readers yield (source, target) pairs one at a time, so a corpus of any size is never held in memory.
Lines are split on b"\\n" only (text mode would also split on \\r, U+2028 and other separators and so
silently misalign the two sides); one trailing \\r is removed, for files written on Windows.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import random
import re
import zlib
from collections import Counter
from collections.abc import Iterator
from itertools import zip_longest
from pathlib import Path
from typing import BinaryIO

from vaswani.errors import VaswaniError

DEFAULT_MAX_LINE_BYTES = 1 << 20  # 1 MiB: a longer line is refused rather than read whole
MAX_LINE_BYTES = 1 << 26  # 64 MiB, the most --max-line-bytes may allow: a line is held whole in
# memory several times over (bytes, text, tokens), and tokenizing one of 50 MB takes minutes
DING_PATH = Path("/usr/share/trans/de-en")
BOM = "\ufeff"

Pair = tuple[str, str]


class DataError(VaswaniError, ValueError):
    """Input data vaswani cannot use; the message names the file, the line and what to do."""


def open_binary(path: Path) -> BinaryIO:
    """Open a file for reading bytes, decompressing gzip (recognised by its magic bytes)."""
    try:
        handle = open(path, "rb")  # noqa: SIM115 - returned to the caller, who closes it
    except FileNotFoundError:
        raise DataError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a directory, expected a text file") from None
    if handle.peek(2)[:2] == b"\x1f\x8b":
        return gzip.open(handle, "rb")  # type: ignore[return-value]
    return handle


MAX_DEPTH = 64  # directory levels under a corpus directory


def walk_files(directory: Path) -> Iterator[Path]:
    """The regular files under `directory`, without following links to directories (a link loop
    cannot trap it) and without recursion; deeper than MAX_DEPTH levels is a DataError."""
    pending = [(Path(directory), 0)]
    while pending:
        folder, depth = pending.pop()
        if depth > MAX_DEPTH:
            raise DataError(f"{directory}: directories nested deeper than {MAX_DEPTH} levels")
        try:
            entries = list(os.scandir(folder))
        except OSError as error:
            raise DataError(f"{folder}: cannot list the directory ({error.strerror})") from None
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                pending.append((Path(entry.path), depth + 1))
            elif entry.is_file():
                yield Path(entry.path)


def split_lines(handle: BinaryIO, name: str | Path, max_line_bytes: int) -> Iterator[bytes]:
    """The lines of a binary stream, without the newline, refusing any longer than the limit."""
    if not 1 <= max_line_bytes <= MAX_LINE_BYTES:
        raise DataError(
            f"--max-line-bytes {max_line_bytes}: must be in 1 .. {MAX_LINE_BYTES} (64 MiB); a "
            "longer line is not one sentence"
        )
    number = 0
    while True:
        try:
            line = handle.readline(max_line_bytes + 2)  # the line, its \r\n, and one byte more
        except (OSError, EOFError, zlib.error) as error:  # a damaged or truncated .gz, EIO, ...
            raise DataError(f"{name}: cannot read past line {number} ({error})") from None
        if not line:
            return
        number += 1
        body = line[:-1] if line.endswith(b"\n") else line
        if len(body) > max_line_bytes + (1 if body.endswith(b"\r") else 0):
            raise DataError(
                f"{name}:{number}: line longer than {max_line_bytes} bytes; split it, or raise "
                "the limit (--max-line-bytes) if it really is one sentence"
            )
        yield body[:-1] if body.endswith(b"\r") else body


def read_lines(path: Path, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES) -> Iterator[bytes]:
    """The lines of a file as bytes, without the newline, refusing any longer than the limit."""
    with open_binary(path) as handle:
        yield from split_lines(handle, path, max_line_bytes)


def decode_line(raw: bytes, path: str | Path, number: int, offset: int) -> str:
    """UTF-8 text of one line, or a DataError naming the file, line and byte offset of the fault."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        raise DataError(
            f"{path}:{number}: invalid UTF-8 at byte offset {offset + error.start} "
            f"(column {error.start + 1}); re-encode the file as UTF-8, or pass --skip-invalid"
        ) from None
    for bad, name in (("\x00", "NUL byte"), (BOM, "byte-order mark (BOM)")):
        column = text.find(bad)
        if column >= 0:
            at = offset + len(text[:column].encode("utf-8"))
            raise DataError(
                f"{path}:{number}: {name} at byte offset {at}; remove it, or pass --skip-invalid"
            )
    return text


def _decoded(lines: Iterator[bytes], name: str | Path) -> Iterator[tuple[int, str | DataError]]:
    """(line number, text or the error for that line), tracking byte offsets for messages."""
    offset = 0
    for number, raw in enumerate(lines, 1):
        try:
            yield number, decode_line(raw, name, number, offset)
        except DataError as error:
            yield number, error
        offset += len(raw) + 1


def decode_lines(lines: Iterator[bytes], name: str | Path) -> Iterator[str]:
    """UTF-8 text of each line; the first fault raises a DataError with line and byte offset."""
    for _, item in _decoded(lines, name):
        if isinstance(item, DataError):
            raise item
        yield item


def _keep(src: str, tgt: str, dropped: Counter) -> bool:
    if not src.strip() or not tgt.strip():
        dropped["empty line"] += 1
        return False
    return True


def read_parallel_files(
    src_path: Path,
    tgt_path: Path,
    dropped: Counter | None = None,
    skip_invalid: bool = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[Pair]:
    """Pairs from two aligned files (line i of one translates line i of the other).

    Different line counts are always an error naming both files and counts. A line that is not
    valid UTF-8 (or holds a NUL byte or a BOM) is an error, or with `skip_invalid` drops the pair
    (both sides, keeping the alignment) and is counted. Empty lines drop the pair and are counted.
    """
    dropped = dropped if dropped is not None else Counter()
    src_lines, tgt_lines = (
        _decoded(read_lines(path, max_line_bytes), path) for path in (src_path, tgt_path)
    )
    for count, (src, tgt) in enumerate(zip_longest(src_lines, tgt_lines), 1):
        if src is None or tgt is None:
            longer_total = count + sum(1 for _ in (src_lines if tgt is None else tgt_lines))
            n_src, n_tgt = (longer_total, count - 1) if tgt is None else (count - 1, longer_total)
            raise DataError(
                f"line counts differ: {src_path} has {n_src} lines, {tgt_path} has {n_tgt}; "
                "the files must be aligned line by line"
            )
        errors = [item for _, item in (src, tgt) if isinstance(item, DataError)]
        if errors:
            if not skip_invalid:
                raise errors[0]
            dropped["invalid text"] += 1
            continue
        if _keep(src[1], tgt[1], dropped):
            yield src[1].strip(), tgt[1].strip()


def read_tsv(
    path: Path,
    dropped: Counter | None = None,
    skip_invalid: bool = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
    column_names: str = "source, target",
) -> Iterator[Pair]:
    """Pairs from a file of `source<TAB>target` lines (exactly two columns; `column_names` names
    them in messages, e.g. "text, label")."""
    dropped = dropped if dropped is not None else Counter()
    for number, item in _decoded(read_lines(path, max_line_bytes), path):
        if isinstance(item, DataError):
            if not skip_invalid:
                raise item
            dropped["invalid text"] += 1
            continue
        if not item.strip():
            dropped["empty line"] += 1
            continue
        columns = item.split("\t")
        if len(columns) != 2:
            if not skip_invalid:
                raise DataError(
                    f"{path}:{number}: expected 2 tab-separated columns ({column_names}), found "
                    f"{len(columns)}; fix the row, or pass --skip-invalid"
                )
            dropped["not two columns"] += 1
            continue
        if _keep(columns[0], columns[1], dropped):
            yield columns[0].strip(), columns[1].strip()


def read_text_files(
    paths: list[Path],
    dropped: Counter | None = None,
    skip_invalid: bool = False,
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
) -> Iterator[Pair]:
    """The non-empty lines of plain text files, as ("", line) pairs: a language model's examples
    have no source side (see `vaswani.data.pipeline`)."""
    dropped = dropped if dropped is not None else Counter()
    for path in paths:
        for _, item in _decoded(read_lines(path, max_line_bytes), path):
            if isinstance(item, DataError):
                if not skip_invalid:
                    raise item
                dropped["invalid text"] += 1
            elif not item.strip():
                dropped["empty line"] += 1
            else:
                yield "", item.strip()


# --- numbers-de: integers in digits -> German number words -------------------------------------

_UNITS = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"]
_TEENS = ["zehn", "elf", "zwölf", "dreizehn", "vierzehn", "fünfzehn", "sechzehn", "siebzehn",
          "achtzehn", "neunzehn"]  # fmt: skip
_TENS = ["", "", "zwanzig", "dreißig", "vierzig", "fünfzig", "sechzig", "siebzig", "achtzig",
         "neunzig"]  # fmt: skip


def _below_thousand(n: int, final: bool) -> str:
    """1..999 in words; `final` when nothing follows (1 is "eins" at the end, "ein" inside)."""
    hundreds, rest = divmod(n, 100)
    words = ""
    if hundreds:
        words = ("ein" if hundreds == 1 else _UNITS[hundreds]) + "hundert"
    if rest == 1:
        words += "eins" if final else "ein"
    elif 1 < rest < 10:
        words += _UNITS[rest]
    elif 10 <= rest < 20:
        words += _TEENS[rest - 10]
    elif rest >= 20:
        tens, ones = divmod(rest, 10)
        if ones:  # the ones come first: 47 -> siebenundvierzig
            words += ("ein" if ones == 1 else _UNITS[ones]) + "und"
        words += _TENS[tens]
    return words


def german_number(n: int) -> str:
    """0 <= n < 1,000,000 as one German word, e.g. 347 -> dreihundertsiebenundvierzig.

    Hundreds and thousands take an explicit "ein": 100 -> einhundert, 1000 -> eintausend.
    """
    if not 0 <= n < 1_000_000:
        raise ValueError(f"german_number covers 0 .. 999999, got {n}")
    if n == 0:
        return "null"
    thousands, rest = divmod(n, 1000)
    words = _below_thousand(thousands, final=False) + "tausend" if thousands else ""
    return words + (_below_thousand(rest, final=True) if rest else "")


def numbers_de(size: int = 30000, seed: int = 0, max_number: int = 999_999) -> Iterator[Pair]:
    """`size` distinct integers drawn with `seed` from 0 .. max_number, as (digits, German words)."""
    if not 0 < size <= max_number + 1:
        raise ValueError(f"size must be in 1 .. {max_number + 1} (max_number + 1), got {size}")
    for n in random.Random(seed).sample(range(max_number + 1), size):
        yield str(n), german_number(n)


# --- numbers-multi: numbers in digits and in the words of four languages -----------------------
# A multilingual corpus that needs no download: digits -> de, en, fr, es, and two pairs between word
# languages (de-en, en-fr), so that a pair never trained (de-fr) can be tried zero-shot.
DIGITS = "digits"
NUMBER_LANGUAGES = ("de", "en", "fr", "es")
NUMBERS_MULTI_PAIRS = ("digits-de", "digits-en", "digits-fr", "digits-es", "de-en", "en-fr")
NUMBERS_MULTI_ZERO_SHOT = "de-fr"


def number_in(n: int, language: str) -> str:
    """`n` in digits, or in the words of `language` (num2words: "trois cent quarante-sept")."""
    from num2words import num2words

    return str(n) if language == DIGITS else num2words(n, lang=language)


def numbers_pair(pair: str, size: int, seed: int = 0, max_number: int = 999_999) -> Iterator[Pair]:
    """`size` distinct integers from 0 .. max_number, drawn with `seed` and the pair's name (each
    pair its own numbers), written in the two languages of `pair` ("digits-fr", "de-en")."""
    src, tgt = pair.split("-")
    if not 0 < size <= max_number + 1:
        raise ValueError(f"size must be in 1 .. {max_number + 1} (max_number + 1), got {size}")
    for n in random.Random(f"{seed}:{pair}").sample(range(max_number + 1), size):
        yield number_in(n, src), number_in(n, tgt)


# --- grammar-en: English sentences from a small grammar (a language-modelling corpus) ---------

_NOUNS = {  # singular -> plural
    "cat": "cats", "dog": "dogs", "bird": "birds", "child": "children", "teacher": "teachers",
    "farmer": "farmers", "robot": "robots", "king": "kings", "girl": "girls", "boy": "boys",
    "house": "houses", "tree": "trees", "river": "rivers", "garden": "gardens", "ball": "balls",
    "book": "books", "box": "boxes", "city": "cities", "bridge": "bridges", "apple": "apples",
}  # fmt: skip
_ADJECTIVES = ["old", "young", "small", "big", "red", "green", "happy", "quiet", "clever", "lazy",
               "tall", "bright"]  # fmt: skip
_TRANSITIVE = {  # third person singular -> plural
    "sees": "see", "likes": "like", "finds": "find", "follows": "follow", "watches": "watch",
    "carries": "carry", "paints": "paint", "visits": "visit",
}  # fmt: skip
_INTRANSITIVE = {"sleeps": "sleep", "sings": "sing", "runs": "run", "waits": "wait",
                 "laughs": "laugh", "dances": "dance"}  # fmt: skip
_ADVERBS = ["slowly", "quickly", "happily", "quietly", "again", "today"]
_PREPOSITIONS = ["near", "behind", "under", "beside", "across", "inside"]


def _noun_phrase(rng: random.Random, plural: bool, depth: int) -> str:
    """Determiner, perhaps an adjective, a noun, perhaps a prepositional phrase."""
    singular_noun = rng.choice(list(_NOUNS))
    determiner = rng.choice(["the", "some", "many", "these", "two"] if plural else
                            ["the", "a", "every", "this", "one"])  # fmt: skip
    words = [determiner]
    if rng.random() < 0.5:
        words.append(rng.choice(_ADJECTIVES))
    words.append(_NOUNS[singular_noun] if plural else singular_noun)
    if determiner == "a" and words[1][0] in "aeiou":  # "an apple", "an old cat"
        words[0] = "an"
    if depth < 1 and rng.random() < 0.25:
        words += [rng.choice(_PREPOSITIONS), _noun_phrase(rng, rng.random() < 0.4, depth + 1)]
    return " ".join(words)


def _clause(rng: random.Random) -> str:
    """A subject and a verb phrase that agrees with it in number."""
    plural = rng.random() < 0.4
    subject = _noun_phrase(rng, plural, 0)
    if rng.random() < 0.6:
        verb = rng.choice(list(_TRANSITIVE))
        verb = _TRANSITIVE[verb] if plural else verb
        predicate = f"{verb} {_noun_phrase(rng, rng.random() < 0.4, 0)}"
    else:
        verb = rng.choice(list(_INTRANSITIVE))
        predicate = _INTRANSITIVE[verb] if plural else verb
        if rng.random() < 0.5:
            predicate += " " + rng.choice(_ADVERBS)
    return f"{subject} {predicate}"


def grammar_en(size: int = 20000, seed: int = 0) -> Iterator[Pair]:
    """`size` English sentences drawn with `seed` from a small grammar (subject-verb agreement,
    adjectives, prepositional phrases, "and"/"because" between clauses), as ("", sentence) pairs.

    A language-modelling corpus every machine can make: its rules are few enough that a small model
    learns them in minutes, and regular enough that a sample can be checked by eye.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    rng = random.Random(seed)
    for _ in range(size):
        sentence = _clause(rng)
        if rng.random() < 0.3:
            sentence += f" {rng.choice(['and', 'because', 'while'])} {_clause(rng)}"
        yield "", sentence[0].upper() + sentence[1:] + " ."


# --- sentiment-en: templated reviews and their sentiment (a classification corpus) -----------

_THINGS = ["film", "book", "meal", "hotel", "concert", "game", "phone", "song", "trip", "show",
           "restaurant", "museum", "camera", "course", "play"]  # fmt: skip
_POSITIVE = ["good", "great", "wonderful", "excellent", "lovely", "brilliant", "fun", "amazing",
             "pleasant", "superb"]  # fmt: skip
_NEGATIVE = ["bad", "awful", "terrible", "boring", "dull", "poor", "horrible", "disappointing",
             "weak", "annoying"]  # fmt: skip
_LIKE = {"loved": "love", "enjoyed": "enjoy", "liked": "like", "adored": "adore"}  # past -> base
_DISLIKE = {"hated": "hate", "disliked": "dislike", "regretted": "regret"}
_INTENSIFIERS = ["", "", "very ", "really ", "quite ", "truly "]


def sentiment_en(size: int = 20000, seed: int = 0) -> Iterator[Pair]:
    """`size` short reviews drawn with `seed` from templates, as (text, "positive"|"negative").

    Negation flips the sentiment ("the film was not good" is negative), so a bag of words is not
    enough: the classifier has to relate "not" to the word it negates.
    """
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size}")
    rng = random.Random(seed)
    for _ in range(size):
        positive = rng.random() < 0.5
        negated = rng.random() < 0.35
        # The words say the opposite of the label when negated.
        words_positive = positive != negated
        thing = rng.choice(_THINGS)
        template = rng.randrange(3)
        if template == 0:
            adjective = rng.choice(_POSITIVE if words_positive else _NEGATIVE)
            verb = rng.choice(["was", "is", "seemed"])
            negation = "not " if negated else ""
            text = f"the {thing} {verb} {negation}{rng.choice(_INTENSIFIERS)}{adjective}"
        elif template == 1:
            forms = _LIKE if words_positive else _DISLIKE
            past = rng.choice(list(forms))
            text = f"i did not {forms[past]} this {thing}" if negated else f"i {past} this {thing}"
        else:
            adjective = rng.choice(_POSITIVE if words_positive else _NEGATIVE)
            article = "an" if adjective[0] in "aeiou" else "a"
            opener = "not " if negated else ""
            ending = rng.choice(["honestly", "overall", "i think"])
            text = f"{opener}{article} {adjective} {thing} , {ending}"
        yield text, "positive" if positive else "negative"


# --- ding-de-en: the German-English dictionary of Debian's trans-de-en -------------------------

_ANNOTATION = re.compile(r"\{[^}]*\}|\[[^\]]*\]")  # {m} {pl} {adj} [coll.] [Br.] ...
_SPACES = re.compile(r"\s+")


def _clean_entry(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def parse_ding_line(line: str) -> list[Pair]:
    """All (German, English) pairs of one dictionary line.

    Format: `German :: English`; each side has aligned sub-entries separated by `|`; a sub-entry
    lists synonyms separated by `;`; `{...}` (grammar) and `[...]` (usage) annotations are removed.
    Every German synonym pairs with every English synonym of the aligned sub-entry.
    """
    if not line.strip() or line.startswith("#") or line.count("::") != 1:
        return []
    # Annotations go first: some hold `;` themselves ("to shrive {shrove; shriven}").
    german, english = (_ANNOTATION.sub(" ", side) for side in line.split("::"))
    german_parts, english_parts = german.split("|"), english.split("|")
    if len(german_parts) != len(english_parts):
        return []
    pairs = []
    for de_part, en_part in zip(german_parts, english_parts, strict=True):
        de_words = [w for w in (_clean_entry(s) for s in de_part.split(";")) if w]
        en_words = [w for w in (_clean_entry(s) for s in en_part.split(";")) if w]
        pairs.extend((de, en) for de in de_words for en in en_words)
    return pairs


def ding_de_en(
    path: Path = DING_PATH, dropped: Counter | None = None, min_words: int = 2
) -> Iterator[Pair]:
    """German-English phrase pairs with at least `min_words` words on each side."""
    dropped = dropped if dropped is not None else Counter()
    path = Path(path)
    if not path.exists():
        hint = (
            "install it with: sudo apt-get update && sudo apt-get install trans-de-en"
            if path == DING_PATH
            else "check the path given with --ding-path"
        )
        raise DataError(f"{path}: the ding-de-en dictionary is missing; {hint}")
    for number, item in _decoded(read_lines(path, DEFAULT_MAX_LINE_BYTES), path):
        if isinstance(item, DataError):
            raise DataError(f"{path}:{number}: not a valid dictionary line ({item})")
        for de, en in parse_ding_line(item):
            if len(de.split()) < min_words or len(en.split()) < min_words:
                dropped[f"fewer than {min_words} words"] += 1
                continue
            yield de, en


# --- splits --------------------------------------------------------------------------------------


def pair_digest(src: str, tgt: str) -> bytes:
    """A stable 16-byte fingerprint of a pair (the same in every process and Python version)."""
    return hashlib.blake2b(f"{src}\t{tgt}".encode(), digest_size=16).digest()


def split_of(digest: bytes, valid_fraction: float, test_fraction: float) -> str:
    """'train', 'valid' or 'test', from the pair's digest alone: adding data never moves a pair."""
    u = int.from_bytes(digest[:8], "big") / 2**64
    if u < test_fraction:
        return "test"
    if u < test_fraction + valid_fraction:
        return "valid"
    return "train"
