"""Language codes as corpora write them: "de", "DE", "de-DE", "de_AT" are all German."""

from __future__ import annotations

import contextlib
import re
from dataclasses import dataclass
from typing import Any

from vaswani.errors import VaswaniError


def normal(code: str) -> str:
    """A language tag in one spelling: lower case, "-" between subtags ("es_MX" -> "es-mx")."""
    return code.strip().replace("_", "-").lower()


@dataclass(frozen=True)
class Language:
    """One language however it is written: "de", "DE", "de-DE", "de_AT", "pt_BR", "zh-Hant",
    "sr@latin", "es_ES.UTF-8" are read alike (`parse`), compared (`matches`), and spelt as each
    platform's folders and file names write it (`spelt`)."""

    base: str
    """The language, lower case ("pt")."""
    subtags: tuple[str, ...] = ()
    """Region and script, each cased as BCP 47 writes it ("BR", "Hant", "419")."""

    @classmethod
    def parse(cls, text: str) -> Language:
        """`text` read as a language; LanguageError for what is none ("", "de en", "1x")."""
        plain = text.strip().split("@")[0].split(".")[0]  # POSIX's sr@latin, es_ES.UTF-8
        parts = [part for part in re.split(r"[-_]", plain) if part]
        if not parts or not parts[0].isalpha() or not all(p.isalnum() for p in parts):
            raise LanguageError(f"{text!r}: not a language (a code such as de, pt-BR, zh_Hant)")
        return cls(parts[0].lower(), tuple(_cased(part) for part in parts[1:]))

    @property
    def tag(self) -> str:
        """BCP 47's spelling: "pt-BR", "zh-Hant"."""
        return "-".join([self.base, *self.subtags])

    def matches(self, asked: Language) -> bool:
        """Whether this language (a file's, a folder's) is the one `asked` for: a bare language
        ("es") is any region of it (es-ES, ES, es_MX); one with a region ("pt-BR") only itself."""
        return self == asked if asked.subtags else self.base == asked.base

    def spelt(self, platform: str = "bcp47") -> str:
        """As `platform` writes it in names: "bcp47" (pt-BR), "posix" (Java's, Qt's, Flutter's
        and gettext's pt_BR), "android" (values-es, values-pt-rBR, values-b+zh+Hans)."""
        if platform == "posix":
            return "_".join([self.base, *self.subtags])
        if platform == "android" and self.subtags:
            if len(self.subtags) == 1 and re.fullmatch(r"[A-Z]{2}|\d{3}", self.subtags[0]):
                return f"{self.base}-r{self.subtags[0]}"
            return "+".join(["b", self.base, *self.subtags])
        return self.tag


def _cased(subtag: str) -> str:
    """A subtag as BCP 47 cases it: a region upper case, a script title case."""
    if len(subtag) == 2:
        return subtag.upper()
    return subtag.title() if len(subtag) == 4 and subtag.isalpha() else subtag.lower()


def base_of(text: str) -> str:
    """The language of a tag, without region or script ("de-AT", "de_AT", "DE" -> "de"); ""
    for a tag that is none."""
    try:
        return Language.parse(text).base
    except LanguageError:
        return ""


def language_matches(found: str, asked: str | None) -> bool:
    """Whether tag `found` (from a file) is the language `asked` for (`Language.matches`); a
    tag that is no language matches nothing."""
    try:
        return bool(asked and found) and Language.parse(found).matches(Language.parse(asked))
    except LanguageError:
        return False


def lingua_language(code: str):
    """lingua's `Language` for an ISO 639-1 code ("de", "de-AT"); ImportError without lingua,
    ValueError for a language it does not know."""
    from lingua import IsoCode639_1, Language

    base = normal(code).split("-", 1)[0]
    try:
        return Language.from_iso_code_639_1(getattr(IsoCode639_1, base.upper()))
    except (AttributeError, ValueError):
        raise ValueError(
            f"{code!r}: not a language lingua identifies (an ISO 639-1 code such as de, en, fr)"
        ) from None


# --- many languages in one model (Johnson et al. 2017) -------------------------------------------
# A multilingual model is told the language to translate into by a token put before each source
# sentence; nothing else in the architecture changes. Its spelling is a setting: Johnson et al. wrote
# "<2es>", OPUS-MT's multilingual models ">>spa<<" (and require it).
LANGUAGE_TOKEN = "<2{lang}>"
MARIAN_LANGUAGE_TOKEN = ">>{lang}<<"
# A macrolanguage's code asked of a model that has only its usual member ("no": Bokmål).
MACROLANGUAGES = {"no": "nb", "nor": "nb"}
FORCED_TOKEN = "__{lang}__"  # M2M-100's form; NLLB's and mBART's tokens are each spelt out


def code(text: str) -> str:
    """A language code as a multilingual dataset keeps it: lower case, a region after "_"
    ("pt-BR" -> "pt_br"), so that "SRC-TGT" names a pair without doubt."""
    found = normal(text).replace("-", "_")
    if not found or not all(part.isalnum() for part in found.split("_")):
        raise ValueError(f"{text!r}: not a language code (letters and digits, a region after _)")
    return found


def parse_pair(text: str) -> tuple[str, str]:
    """ "de-en" -> ("de", "en"); a region is written after "_" (pt_BR-en)."""
    parts = text.strip().split("-")
    if len(parts) != 2:
        raise ValueError(f"{text!r}: name a pair as SRC-TGT (de-en; a region after _: pt_BR-en)")
    src, tgt = (code(part) for part in parts)
    if src == tgt:
        raise ValueError(f"{text!r}: a pair of one language with itself")
    return src, tgt


class LanguageError(VaswaniError, ValueError):
    """A language, a pair or a languages record vaswani cannot use; the message names it."""


def pair_name(src: str, tgt: str) -> str:
    return f"{src}-{tgt}"


def listed(codes: list[str], limit: int = 30) -> str:
    """Language codes for a message: all of them, or the first `limit` and how many more."""
    more = f" and {len(codes) - limit} more" if len(codes) > limit else ""
    return ", ".join(codes[:limit]) + more


def check_token_form(form: str) -> str:
    """A language-token form must hold {lang} once and something around it."""
    if form.count("{lang}") != 1 or form == "{lang}" or any(c.isspace() for c in form):
        raise ValueError(
            f"language token {form!r}: give a form with {{lang}} once and no spaces, e.g. "
            f"{LANGUAGE_TOKEN} or {MARIAN_LANGUAGE_TOKEN}"
        )
    return form


class Languages:
    """The language pairs a multilingual dataset (and the model trained on it) knows, and the token
    that asks for each target language: meta.json's "languages" record, read back. `tokens`: the
    tokens spelt otherwise than the form says (an imported model's ">>por_Latn<<" for por_latn).

    `forced`: the scheme of M2M-100, NLLB-200 and mBART-50, where every language is a source and
    a target: the source's token goes before the source text and the target's is forced as the
    decoder's first token, instead of one target token before the source (Johnson et al.)."""

    def __init__(
        self,
        pairs: list[tuple[str, str]],
        token: str = LANGUAGE_TOKEN,
        tokens: dict[str, str] | None = None,
        forced: bool = False,
    ) -> None:
        self.pairs = list(dict.fromkeys(pairs))
        self.token = check_token_form(token)
        self.tokens = dict(tokens or {})
        self.forced = forced
        self.targets = sorted({tgt for _, tgt in self.pairs})
        self.sources = sorted({src for src, _ in self.pairs})
        spellings = {}  # the model's own tokens as codes: "spa_Latn" and "__es__" name es
        for lang, token in self.tokens.items():
            with contextlib.suppress(ValueError):
                spellings[code(token.strip("_<>"))] = lang
        self.spellings = {**spellings, **{lang: lang for lang in self.targets + self.sources}}

    @classmethod
    def among(cls, tokens: dict[str, str]) -> Languages:
        """Every pair of the languages of `tokens` (code -> the model's token), forced."""
        pairs = [(a, b) for a in tokens for b in tokens if a != b]
        return cls(pairs, FORCED_TOKEN, tokens, forced=True)

    def token_of(self, target: str) -> str:
        return self.tokens.get(target) or self.token.format(lang=target)

    def known(self, asked: str) -> str | None:
        """The language of this model `asked` names, in any spelling: its code, the model's own
        token ("spa_Latn", "es_XX"), ISO 639-3 ("spa"), a region or script ("es-MX", "zh-TW")."""
        try:
            found = code(asked)
        except ValueError:
            return None
        if found in self.spellings:
            return self.spellings[found]
        base, *rest = found.split("_")
        base = MACROLANGUAGES.get(base, iso_639_1(base))
        if rest:
            script = likely_script(f"{base}_{rest[0]}") or rest[0]
            with_script = f"{base}_{script.lower()}"
            if with_script in self.spellings:
                return self.spellings[with_script]
        return self.spellings.get(base)

    def target(self, asked: str) -> str:
        """The known target language `asked` names (`known`); LanguageError with the known ones
        otherwise."""
        found = self.known(asked)
        if found not in self.targets:
            raise LanguageError(
                f"--target {asked}: this model translates into {listed(self.targets)}"
            )
        return found

    def source(self, asked: str) -> str:
        """The known source language `asked` names (`known`); LanguageError otherwise."""
        found = self.known(asked)
        if found not in self.sources:
            raise LanguageError(
                f"--source-lang {asked}: this model translates from {listed(self.sources)}"
            )
        return found

    def record(self) -> dict:
        if self.forced:
            return {"token": self.token, "forced": True, "tokens": self.tokens}
        return {
            "token": self.token,
            "pairs": [pair_name(*pair) for pair in self.pairs],
            **({"tokens": self.tokens} if self.tokens else {}),
        }

    def prefixes(
        self, targets: list[str], tokenizer: Any, sources: list[str] | None = None
    ) -> list[list[int]]:
        """The ids to put before each source to ask for its target (known codes, `target`).
        A forced model gets [source token, target token]: the first goes before the text, the
        second is taken off and forced as the translation's first token
        (`vaswani.decoding.text.encode_sources`)."""
        if self.forced and sources is None:
            raise LanguageError("this model is told the source language too: give --source-lang")
        wanted = set(targets) | set(sources or [])
        ids = {lang: tokenizer.token_id(self.token_of(lang)) for lang in wanted}
        missing = sorted(lang for lang, found in ids.items() if found is None)
        if missing:
            raise LanguageError(f"the tokenizer has no token for {', '.join(missing)}")
        if self.forced:
            return [[ids[s], ids[t]] for s, t in zip(sources, targets, strict=True)]
        return [[ids[target]] for target in targets]

    @classmethod
    def from_meta(cls, meta: dict) -> Languages | None:
        """The languages of a meta.json record; None for a dataset of one pair. A damaged
        record (no token, pairs that are not SRC-TGT names, tokens not a mapping of strings) is
        a LanguageError: meta.json and data.json may have been edited by hand."""
        record = meta.get("languages")
        if not record:
            return None
        if isinstance(record, dict) and record.get("forced") is True:
            tokens = record.get("tokens")
            if not (isinstance(tokens, dict) and len(tokens) > 1):
                raise LanguageError(f"damaged languages record: tokens {str(tokens)[:80]}")
            if not all(isinstance(v, str) and isinstance(k, str) for k, v in tokens.items()):
                raise LanguageError(f"damaged languages record: tokens {str(tokens)[:80]}")
            return cls.among(tokens)
        pairs, token, tokens = (
            record.get(k) if isinstance(record, dict) else None
            for k in ("pairs", "token", "tokens")
        )
        if not (isinstance(pairs, list) and pairs and all(isinstance(p, str) for p in pairs)):
            raise LanguageError(
                f"damaged languages record: pairs {str(pairs)[:80]} (SRC-TGT names)"
            )
        if not isinstance(token, str):
            raise LanguageError(f"damaged languages record: token {str(token)[:80]}")
        if tokens is not None and not (
            isinstance(tokens, dict) and all(isinstance(v, str) for v in tokens.values())
        ):
            raise LanguageError(f"damaged languages record: tokens {str(tokens)[:80]}")
        try:
            return cls([parse_pair(name) for name in pairs], token, tokens)
        except ValueError as error:
            raise LanguageError(f"damaged languages record: {error}") from None


def marian_languages(vocabulary: dict[str, int], source: str = "mul") -> Languages | None:
    """The target languages of an OPUS-MT model, from the `>>xxx<<` tokens of its vocabulary (as
    Hugging Face's MarianTokenizer finds them), each paired with `source`; None unless there are
    two or more (OPUS-MT's bilingual models have none, and require none)."""
    spelt = {}
    for piece in vocabulary:
        inner = piece[2:-2] if piece.startswith(">>") and piece.endswith("<<") else ""
        with contextlib.suppress(ValueError):
            spelt[code(inner)] = piece
    if len(spelt) < 2:
        return None
    pairs = [(source, target) for target in sorted(spelt) if target != source]
    tokens = {target: piece for target, piece in spelt.items() if piece != f">>{target}<<"}
    return Languages(pairs, MARIAN_LANGUAGE_TOKEN, tokens)


def iso_639_1(base: str) -> str:
    """The two-letter code of an ISO 639-3 one where there is one (CLDR's aliases: "spa" -> "es",
    "arb" -> "ar", "zsm" -> "ms"); `base` otherwise."""
    from babel.core import get_global

    alias = get_global("language_aliases").get(base, base)
    return normal(alias).replace("-", "_")


def likely_script(tag: str) -> str | None:
    """The script CLDR says a language (with a region) is written in: "zh_TW" -> "Hant"."""
    from babel.core import get_global

    likely = get_global("likely_subtags")
    base, _, region = tag.partition("_")
    found = likely.get(f"{base}_{region.upper()}") or likely.get(base.lower(), "")
    parts = found.split("_")
    return parts[1] if len(parts) > 2 and len(parts[1]) == 4 else None


def hub_languages(tokens: list[str]) -> dict[str, str]:
    """vaswani's code for each language token of a Hugging Face multilingual model: NLLB's
    "spa_Latn", mBART-50's "es_XX" and M2M-100's "__es__" are all "es". A language written in
    two scripts ("zho_Hans", "zho_Hant") keeps the bare code for the script CLDR says is usual
    and gets the script after it for the other ("zh", "zh_hant")."""
    parsed: dict[str, list[tuple[bool, str, str]]] = {}
    for token in tokens:
        inner = token[2:-2] if token.startswith("__") and token.endswith("__") else token
        base, _, rest = inner.partition("_")
        key = iso_639_1(base.lower())
        script = rest if len(rest) == 4 else ""  # a region (mBART's "XX", "CN") is dropped
        parsed.setdefault(key, []).append((key != base.lower(), script, token))
    codes: dict[str, str] = {}
    for base, spelt in parsed.items():
        usual = likely_script(base) if len(spelt) > 1 else spelt[0][1]
        # Two tokens one code names (NLLB's ajp_Arab and apc_Arab are both apc): the one spelt
        # with that code gets it, the other keeps its own spelling.
        for _, script, token in sorted(spelt):
            key = base if script == usual else f"{base}_{script.lower()}"
            codes[code(token.strip("_")) if key in codes else key] = token
    return codes
