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
