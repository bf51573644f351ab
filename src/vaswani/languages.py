"""Language codes as corpora write them: "de", "DE", "de-DE", "de_AT" are all German."""

from __future__ import annotations

import contextlib
from typing import Any

from vaswani.errors import VaswaniError


def normal(code: str) -> str:
    """A language tag in one spelling: lower case, "-" between subtags ("es_MX" -> "es-mx")."""
    return code.strip().replace("_", "-").lower()


def language_matches(found: str, asked: str | None) -> bool:
    """Whether tag `found` (from a file) is the language `asked` for: a bare language ("es")
    matches any region of it (es-ES, ES, es_MX); a tag with a region ("pt-BR") only itself."""
    if not asked or not found:
        return False
    found, asked = normal(found), normal(asked)
    return found == asked if "-" in asked else found.split("-", 1)[0] == asked


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
    tokens spelt otherwise than the form says (an imported model's ">>por_Latn<<" for por_latn)."""

    def __init__(
        self,
        pairs: list[tuple[str, str]],
        token: str = LANGUAGE_TOKEN,
        tokens: dict[str, str] | None = None,
    ) -> None:
        self.pairs = list(dict.fromkeys(pairs))
        self.token = check_token_form(token)
        self.tokens = dict(tokens or {})
        self.targets = sorted({tgt for _, tgt in self.pairs})
        self.sources = sorted({src for src, _ in self.pairs})

    def token_of(self, target: str) -> str:
        return self.tokens.get(target) or self.token.format(lang=target)

    def target(self, asked: str) -> str:
        """The known target language `asked` names (any spelling of its code); ValueError with
        the known ones otherwise."""
        try:
            found = code(asked)
        except ValueError:
            found = ""
        if found not in self.targets:
            raise LanguageError(
                f"--target {asked}: this model translates into {', '.join(self.targets)}"
            )
        return found

    def record(self) -> dict:
        return {
            "token": self.token,
            "pairs": [pair_name(*pair) for pair in self.pairs],
            **({"tokens": self.tokens} if self.tokens else {}),
        }

    def prefixes(self, targets: list[str], tokenizer: Any) -> list[list[int]]:
        """The ids to put before each source to ask for its target (known codes, `target`)."""
        ids = {target: tokenizer.token_id(self.token_of(target)) for target in set(targets)}
        missing = sorted(target for target, found in ids.items() if found is None)
        if missing:
            raise LanguageError(f"the tokenizer has no token for {', '.join(missing)}")
        return [[ids[target]] for target in targets]

    @classmethod
    def from_meta(cls, meta: dict) -> Languages | None:
        """The languages of a meta.json record; None for a dataset of one pair. A damaged
        record (no token, pairs that are not SRC-TGT names, tokens not a mapping of strings) is
        a LanguageError: meta.json and data.json may have been edited by hand."""
        record = meta.get("languages")
        if not record:
            return None
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
