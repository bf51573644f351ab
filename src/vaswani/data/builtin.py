"""The built-in corpora, made by rule or read from a Debian package, so that every task can be
tried without data: numbers-de and numbers-multi (numbers in digits and words), grammar-en (a
language-modelling corpus), sentiment-en (a classification corpus), ding-de-en (a dictionary).
Each is a generator of (source, target) pairs, a pure function of its size and seed."""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

from vaswani.data.corpora import DEFAULT_MAX_LINE_BYTES, DataError, Pair, numbered_lines, read_lines

DING_PATH = Path("/usr/share/trans/de-en")


# --- numbers-de: integers in digits -> German number words -------------------------------------

_UNITS = ["null", "eins", "zwei", "drei", "vier", "fünf", "sechs", "sieben", "acht", "neun"]
_TEENS = [
    "zehn",
    "elf",
    "zwölf",
    "dreizehn",
    "vierzehn",
    "fünfzehn",
    "sechzehn",
    "siebzehn",
    "achtzehn",
    "neunzehn",
]
_TENS = [
    "",
    "",
    "zwanzig",
    "dreißig",
    "vierzig",
    "fünfzig",
    "sechzig",
    "siebzig",
    "achtzig",
    "neunzig",
]


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
    "cat": "cats",
    "dog": "dogs",
    "bird": "birds",
    "child": "children",
    "teacher": "teachers",
    "farmer": "farmers",
    "robot": "robots",
    "king": "kings",
    "girl": "girls",
    "boy": "boys",
    "house": "houses",
    "tree": "trees",
    "river": "rivers",
    "garden": "gardens",
    "ball": "balls",
    "book": "books",
    "box": "boxes",
    "city": "cities",
    "bridge": "bridges",
    "apple": "apples",
}
_ADJECTIVES = [
    "old",
    "young",
    "small",
    "big",
    "red",
    "green",
    "happy",
    "quiet",
    "clever",
    "lazy",
    "tall",
    "bright",
]
_TRANSITIVE = {  # third person singular -> plural
    "sees": "see",
    "likes": "like",
    "finds": "find",
    "follows": "follow",
    "watches": "watch",
    "carries": "carry",
    "paints": "paint",
    "visits": "visit",
}
_INTRANSITIVE = {
    "sleeps": "sleep",
    "sings": "sing",
    "runs": "run",
    "waits": "wait",
    "laughs": "laugh",
    "dances": "dance",
}
_ADVERBS = ["slowly", "quickly", "happily", "quietly", "again", "today"]
_PREPOSITIONS = ["near", "behind", "under", "beside", "across", "inside"]


def _noun_phrase(rng: random.Random, plural: bool, depth: int) -> str:
    """Determiner, perhaps an adjective, a noun, perhaps a prepositional phrase."""
    singular_noun = rng.choice(list(_NOUNS))
    determiner = rng.choice(
        ["the", "some", "many", "these", "two"] if plural else ["the", "a", "every", "this", "one"]
    )
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

_THINGS = [
    "film",
    "book",
    "meal",
    "hotel",
    "concert",
    "game",
    "phone",
    "song",
    "trip",
    "show",
    "restaurant",
    "museum",
    "camera",
    "course",
    "play",
]
_POSITIVE = [
    "good",
    "great",
    "wonderful",
    "excellent",
    "lovely",
    "brilliant",
    "fun",
    "amazing",
    "pleasant",
    "superb",
]
_NEGATIVE = [
    "bad",
    "awful",
    "terrible",
    "boring",
    "dull",
    "poor",
    "horrible",
    "disappointing",
    "weak",
    "annoying",
]
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
            else "check the path given as ding_path=..."
        )
        raise DataError(f"{path}: the ding-de-en dictionary is missing; {hint}")
    for number, item in numbered_lines(read_lines(path, DEFAULT_MAX_LINE_BYTES), path):
        if isinstance(item, DataError):
            raise DataError(f"{path}:{number}: not a valid dictionary line ({item})")
        for de, en in parse_ding_line(item):
            if len(de.split()) < min_words or len(en.split()) < min_words:
                dropped[f"fewer than {min_words} words"] += 1
                continue
            yield de, en
