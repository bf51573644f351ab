"""The LibreTranslate API, so that its clients (Mastodon, Weblate, SearXNG, libretranslatepy,
deep-translator) can use a vaswani server unmodified.

    POST /translate   q (a text or a list), source (a code or "auto"), target, format ("text" or
                      "html"), alternatives (n-best from the beam), api_key; JSON or form data
                      -> {"translatedText": ..., "alternatives": ..., "detectedLanguage": ...}
    GET  /languages   [{"code", "name", "targets"}], one per source language served
    POST /detect      q -> [{"language", "confidence"}], best first

and, for people, a web page at / (page.html: plain HTML and a little JavaScript, nothing fetched
from elsewhere) with POST /attention behind its "Show attention" button.

Errors are LibreTranslate's: {"error": "..."} with 400 (bad request), 403 (API key), 429 (rate
limit), 503/504 (busy, deadline) and 500. The server's limits (texts, characters, queue,
deadline) apply as to vaswani's own endpoints. Language detection uses lingua
(`pip install 'vaswani[detect]'`), restricted to the source languages served; it is needed only
when more than one source language can reach the asked target.
"""

from __future__ import annotations

import dataclasses
from contextlib import suppress
from importlib import resources
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse

from vaswani.decoding.text import Translation
from vaswani.documents.html import HtmlDocument, HtmlError
from vaswani.errors import VaswaniError
from vaswani.languages import lingua_language
from vaswani.safe_io import read_text
from vaswani.serve.keys import KeyStore
from vaswani.serve.pairs import Pairs, Routed
from vaswani.serve.refusals import Refused
from vaswani.serve.schemas import BodyError, json_body
from vaswani.serve.shared import MemoryStorage, RedisStorage
from vaswani.serve.suggestions import RedisSuggestions, Suggestions
from vaswani.serve.worker import Attending, served, text_problems, with_aids
from vaswani.translation.request import Request as Asked

FORMATS = ("text", "html")


class AccessError(VaswaniError):
    """An API key file that cannot be used."""


class Access:
    """Optional API keys (a file, one key a line) and a per-key (or, without a key, per-client)
    limit of requests a minute: a token bucket refilled continuously, kept in `storage`
    (`serve --shared-storage`: this process's memory, or Redis for replicas). Keys in a database
    (`store`, `serve --keys-db`) have limits of their own, requests a minute and characters a
    day, counted in Redis where the storage is Redis, else in the database.

    LibreTranslate's policy: a wrong key is refused (403); a request without a key is served at
    the per-client limit unless keys are `required` (`serve --require-api-key`, and a key file,
    whose keys are the only way in)."""

    def __init__(
        self,
        keys: set[str] | None = None,
        per_minute: int | None = None,
        store: KeyStore | None = None,
        storage: MemoryStorage | RedisStorage | None = None,
        required: bool = False,
    ) -> None:
        self.keys, self.per_minute, self.store = keys, per_minute, store
        self.storage = storage or MemoryStorage()
        self.required = required or keys is not None  # a key file's keys are the only way in

    @classmethod
    def from_file(cls, path: Path | None, per_minute: int | None, required: bool = False) -> Access:
        if path is None:
            return cls(None, per_minute, required=required)
        keys = {line.strip() for line in read_text(path, "API key file").splitlines()}
        keys.discard("")
        if not keys:
            raise AccessError(f"--api-keys {path}: no key in it (one key a line)")
        return cls(keys, per_minute)

    def check(self, key: Any, client: str, chars: int = 0) -> None:
        """403 for a wrong key, or a missing one where keys are required; 429 over the rate
        limit (or a database key's limits, `chars` counted against its day's)."""
        if key is not None and key != "":
            if self.store is not None and isinstance(key, str):
                found, why = self.store.spend(key, chars, counter=self.usage_counter)
                if found is not None:
                    if why is not None:
                        raise Refused("rate_limited", why)
                    return
            keyed = self.store is not None or self.keys is not None
            if keyed and (self.keys is None or not isinstance(key, str) or key not in self.keys):
                raise Refused("forbidden", "Invalid API key")
        elif self.required:
            raise Refused("forbidden", "An API key is required")
        if self.per_minute is None:
            return
        mine = self.keys is not None and isinstance(key, str) and key in self.keys
        who = f"key:{key}" if mine else f"client:{client}"
        if not self.storage.take(who, self.per_minute):
            raise Refused(
                "rate_limited", f"Too many requests: the limit is {self.per_minute} a minute"
            )

    @property
    def usage_counter(self) -> MemoryStorage | RedisStorage | None:
        """Where database keys' usage is counted: the shared storage where it counts usage
        (Redis), else None (the keys database itself)."""
        return self.storage if self.storage.counts_usage else None

    def charge(self, key: Any, chars: int) -> None:
        """Count the characters of a request already admitted (a file's, known once it is
        read) against a database key's day: 429 over it, nothing counted then."""
        if self.store is None or not isinstance(key, str):
            return
        found, why = self.store.spend(key, chars, counter=self.usage_counter, requests=0)
        if found is not None and why is not None:
            raise Refused("rate_limited", why)


class Detector:
    """Language identification among the source languages served (lingua)."""

    def __init__(self, codes: list[str]) -> None:
        self.codes = codes
        self.detector = None
        if len(codes) > 1:
            try:
                from lingua import LanguageDetectorBuilder
            except ImportError:
                return  # said when a request needs it
            languages = []
            for code in codes:
                with suppress(ValueError):  # a language lingua does not know is never detected
                    languages.append(lingua_language(code))
            if len(languages) > 1:
                self.detector = LanguageDetectorBuilder.from_languages(*languages).build()

    def detect(self, text: str, among: list[str] | None = None) -> list[dict]:
        """[{"language", "confidence" (0-100)}], best first, among `among` (default: all)."""
        among = among or self.codes
        if len(among) == 1:
            return [{"language": among[0], "confidence": 100.0}]
        if self.detector is None:
            raise Refused(
                "bad_request",
                "source 'auto' needs language detection: pip install 'vaswani[detect]'",
            )
        values = self.detector.compute_language_confidence_values(text)
        found = [(v.language.iso_code_639_1.name.lower(), v.value) for v in values]
        found = [(code, value) for code, value in found if code in among]
        total = sum(value for _, value in found)
        if total <= 0:
            return [{"language": among[0], "confidence": 0.0}]
        return [
            {"language": code, "confidence": round(100 * value / total, 1)} for code, value in found
        ]


STRING_FIELDS = ("source", "target", "format", "api_key")


def string_fields(fields: dict[str, Any]) -> dict[str, Any]:
    """`fields` after checking that those of STRING_FIELDS are strings: a list or an object there
    would reach the lookups of served pairs and end in a 500."""
    for key in STRING_FIELDS:
        if fields.get(key) is not None and not isinstance(fields[key], str):
            raise Refused("bad_request", f"Invalid request: {key} must be a string")
    return fields


async def request_fields(request: Request, body: bytes) -> dict[str, Any]:
    """A LibreTranslate request's fields, where LibreTranslate reads them: a JSON body, or else
    the query string and form data together (Flask's `request.values`: a field of the query
    string first; q may repeat). deep-translator's client posts its fields in the query
    string."""
    content_type = request.headers.get("content-type", "")
    if content_type.startswith("application/json"):
        try:
            data = json_body(body)
        except BodyError as error:
            raise Refused("bad_request", f"Invalid request: {error}") from None
        if not isinstance(data, dict):
            raise Refused("bad_request", "Invalid request: expected a JSON object")
        return string_fields(data)
    return values(request.query_params, await request.form())


def values(query: Any, form: Any) -> dict[str, Any]:
    """Fields of the query string and of a form (Starlette's multi-dicts) as one: the query
    string's first where both have one, every q of both where q repeats."""
    fields: dict[str, Any] = {key: form.get(key) for key in form}
    fields.update({key: query.get(key) for key in query})
    every_q = query.getlist("q") + form.getlist("q")
    if len(every_q) > 1:
        fields["q"] = every_q
    return fields


def texts_of(fields: dict[str, Any], settings: Any) -> tuple[list[str], bool]:
    """The texts of q and whether q was a list; 400 for anything else."""
    q = fields.get("q")
    if q is None or q == "" or q == []:
        raise Refused("bad_request", "Invalid request: missing q parameter")
    many = isinstance(q, list)
    texts = q if many else [q]
    if not all(isinstance(t, str) for t in texts):
        raise Refused("bad_request", "Invalid request: q must be a string or a list of strings")
    problems = text_problems(texts, settings)  # the limits of vaswani's own endpoints
    if problems:
        raise Refused("bad_request", "Invalid request: " + "; ".join(problems))
    return texts, many


def alternatives_of(fields: dict[str, Any], max_beam: int) -> int:
    value = fields.get("alternatives", 0) or 0
    try:
        n = int(value)
    except (TypeError, ValueError, OverflowError):  # OverflowError: 1e400 parses as infinity
        raise Refused(
            "bad_request", "Invalid request: alternatives must be a whole number"
        ) from None
    if isinstance(value, bool) or isinstance(value, float) and not value.is_integer() or n < 0:
        raise Refused("bad_request", "Invalid request: alternatives must be a whole number >= 0")
    if n + 1 > max_beam:
        raise Refused("bad_request", f"Invalid request: at most {max_beam - 1} alternatives")
    return n


class Libre:
    """The LibreTranslate endpoints over the translation workers `pairs`."""

    def __init__(
        self,
        pairs: Pairs,
        access: Access,
        settings: Any,
        suggestions: Suggestions | RedisSuggestions | None = None,
    ) -> None:
        self.pairs, self.access, self.settings = pairs, access, settings
        self.detector = Detector(sorted({source for source, _ in pairs.workers}))
        self.suggestions = suggestions
        """Where POST /suggest stores what users send (`serve --suggestions FILE|URI`)."""

    def add_routes(self, app: FastAPI) -> None:
        app.get("/languages")(self.languages)
        app.post("/detect")(self.detect_endpoint)
        app.post("/attention")(self.attention_endpoint)
        app.post("/suggest")(self.suggest)
        app.get("/", response_class=HTMLResponse, include_in_schema=False)(self.page)

    async def page(self) -> HTMLResponse:
        """The web page: type text, pick the pair, read the translation, see its attention."""
        return HTMLResponse(resources.files("vaswani.serve").joinpath("page.html").read_text())

    async def attention_endpoint(self, request: Request) -> JSONResponse:
        """The translation of q (one text) and the encoder-decoder attention of the last
        decoder layer, averaged over heads: a row per output token, a column per input token."""
        try:
            fields = await request_fields(request, await request.body())
            self.access.check(fields.get("api_key"), client_of(request))
            texts, many = texts_of(fields, self.settings)
            if many:
                raise Refused("bad_request", "Invalid request: attention takes one text")
            routed = self.routed(fields, texts)
            if routed.middle is not None:
                raise Refused(
                    "bad_request", "Invalid request: attention is not given through a pivot"
                )
            found, _ = await self.run(routed, texts, "text", 0, split_of(fields))
            worker = routed.worker
            problems, tokens = worker.problems(texts, worker.model.cfg.max_len)
            asked = Attending((found[0][0],))
            return JSONResponse((await worker.submit(texts, asked, problems, tokens))[0])
        except Refused as error:
            return error.answer(libre=True)

    async def suggest(self, request: Request) -> JSONResponse:
        """A user's better translation: q (the text), s (its translation), source, target;
        {"success": true} once stored, 403 where suggestions are off (as LibreTranslate)."""
        try:
            fields = await request_fields(request, await request.body())
            self.access.check(fields.get("api_key"), client_of(request))
            if self.suggestions is None:
                raise Refused("forbidden", "Suggestions are disabled on this server.")
            source, target = (self.pairs.spelt(fields.get(k)) for k in ("source", "target"))
            if (source, target) not in self.pairs.workers:
                raise Refused("bad_request", f"{source}:{target} is not served; see /languages")
            texts = [fields.get(k) for k in ("q", "s")]
            if not all(isinstance(t, str) and t.strip() for t in texts):
                raise Refused(
                    "bad_request", "Invalid request: give q (the text) and s (its translation)"
                )
            problems = text_problems(texts, self.settings)
            if problems:
                raise Refused("bad_request", "Invalid request: " + "; ".join(problems))
            self.suggestions.add(source, target, *texts)
            return JSONResponse({"success": True})
        except Refused as error:
            return error.answer(libre=True)

    async def languages(self) -> JSONResponse:
        """The source languages served, each with the targets it can be translated into."""
        return JSONResponse(self.pairs.languages())

    async def detect_endpoint(self, request: Request) -> JSONResponse:
        """The language of q among the source languages served, best first."""
        try:
            fields = await request_fields(request, await request.body())
            self.access.check(fields.get("api_key"), client_of(request))
            texts, _ = texts_of(fields, self.settings)
            return JSONResponse(self.detector.detect(" ".join(texts)))
        except Refused as error:
            return error.answer(libre=True)

    async def translate(self, request: Request, fields: dict[str, Any]) -> JSONResponse:
        try:
            q = fields.get("q")
            chars = sum(len(t) for t in (q if isinstance(q, list) else [q]) if isinstance(t, str))
            self.access.check(string_fields(fields).get("api_key"), client_of(request), chars)
            return JSONResponse(await self.translated(fields))
        except Refused as error:
            return error.answer(libre=True)
        except Exception as error:  # the model failed: said as LibreTranslate says it
            return JSONResponse(
                {"error": f"translation failed: {type(error).__name__}: {error}"}, status_code=500
            )

    async def translated(self, fields: dict[str, Any]) -> dict[str, Any]:
        texts, many = texts_of(fields, self.settings)
        fmt = fields.get("format") or "text"
        if fmt not in FORMATS:
            raise Refused(
                "bad_request", f"Invalid request: format must be text or html, not {fmt!r}"
            )
        alternatives = alternatives_of(fields, self.settings.max_beam_size)
        routed = self.routed(fields, texts)
        found, confidences = await self.run(routed, texts, fmt, alternatives, split_of(fields))
        middle, detected = routed.middle, routed.detected
        best = [options[0] for options in found]
        answer: dict[str, Any] = {"translatedText": best if many else best[0]}
        # not LibreTranslate's: each translation's confidence in [0, 1] (clients ignore it)
        answer["confidence"] = confidences if many else confidences[0]
        if middle is not None:  # not LibreTranslate's: says the text went through `middle`
            answer["pivot"] = middle
        if alternatives:
            rest = [options[1:] for options in found]
            answer["alternatives"] = rest if many else rest[0]
        if detected is not None:
            answer["detectedLanguage"] = detected if not many else [detected] * len(texts)
        return answer

    def routed(self, fields: dict[str, Any], texts: list[str]) -> Routed:
        """Where a request's `source` and `target` fields send it (`Pairs.resolve`: "auto", or
        none, detected on `texts`); a pair not served is refused (400)."""
        source, target = fields.get("source"), fields.get("target")
        return self.pairs.resolve(source, target, texts, self.detector.detect)

    async def run(
        self, routed: Routed, texts: list[str], fmt: str, alternatives: int, split: bool = True
    ) -> tuple[list[list[str]], list[float]]:
        """Each text's best translation and `alternatives` more, and its confidence (an HTML
        page's: its blocks' mean). A text (or an HTML block) of several sentences is translated
        sentence by sentence, split by the rules of its source language, unless `split` is
        False; html: each block with its inline markup placed back by word alignment, and
        everything else kept (`vaswani.documents.html`)."""
        try:
            pages = [HtmlDocument.parse(t) for t in texts] if fmt == "html" else None
        except HtmlError as error:
            raise Refused("bad_request", f"Malformed HTML: {error}") from None
        pieces = [p for page in pages for p in page.texts()] if pages is not None else texts
        n = alternatives + 1
        decoding = dataclasses.replace(
            self.settings.decoding,
            beam_size=max(self.settings.beam_size, n),
            n_best=n,
            batch_tokens=max(self.settings.batch_tokens, n),
        )
        asked = Asked(
            target=routed.target,
            decoding=decoding,
            split=split,
            language=routed.source,
            align=pages is not None,
        )
        request = with_aids(routed.worker, asked)
        done = await served(routed.worker, pieces, request) if pieces else None
        joined = done.found if done is not None else []
        options = [nbest_texts(f, n) for f in joined]
        confidences = [round(f[0].confidence, 4) if f else 1.0 for f in joined]
        if pages is None:
            return options, confidences
        # through a pivot there is no alignment: tags keep their relative place
        alignments = done.alignments if done is not None else []
        out, start, page_confidences = [], 0, []
        for page in pages:
            mine = slice(start, start + len(page.texts()))
            start = mine.stop
            blocks = confidences[mine]
            page_confidences.append(round(sum(blocks) / len(blocks), 4) if blocks else 1.0)
            out.append(
                [
                    page.rebuild(
                        [o[k] for o in options[mine]],
                        alignments[mine] if k == 0 else [None] * len(options[mine]),
                    )
                    for k in range(n)
                ]
            )
        return out, page_confidences


def nbest_texts(found: list[Translation], n: int) -> list[str]:
    """n texts from a text's n-best `Translation`s (padded if fewer; none: a blank text)."""
    texts = [t.text for t in found]
    return (texts + [texts[-1]] * n)[:n] if texts else [""] * n


def split_of(fields: dict[str, Any]) -> bool:
    """vaswani's `split` field (not LibreTranslate's): false translates each text whole."""
    value = fields.get("split", True)
    if isinstance(value, str) and value.strip().lower() in ("true", "1", "false", "0"):
        return value.strip().lower() in ("true", "1")
    if not isinstance(value, bool):
        raise Refused("bad_request", "Invalid request: split must be true or false")
    return value


def client_of(request: Request) -> str:
    return request.client.host if request.client else "unknown"
