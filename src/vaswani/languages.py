"""Language codes as corpora write them: "de", "DE", "de-DE", "de_AT" are all German."""

from __future__ import annotations


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
        raise ValueError(f"{code!r}: not a language lingua identifies (an ISO 639-1 code such "
                         "as de, en, fr)") from None  # fmt: skip
