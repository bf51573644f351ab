"""LibreTranslate's file API, so that its clients and its web page translate whole files here:

    POST /translate_file      multipart: file, source (a code or "auto"), target, api_key
                              -> {"translatedFileUrl": ".../download_file/NAME"}
    GET  /download_file/NAME  the translated file (until it expires: --file-ttl seconds)
    GET  /frontend/settings   what LibreTranslate's front end asks: limits, supportedFilesFormat

Files are read by `vaswani.documents` (every format of `vaswani translate --input`), within the
server's limits: --max-file-bytes, --max-file-chars, and the zip and XML limits of the readers.
Their sentences go through the same worker as /translate requests, at most --max-texts at a
time, so a long file shares the model with short requests instead of blocking them. A
download's name is looked up among the files this server (or, with --shared-storage redis://, a
replica) wrote, never joined to a path.
"""

from __future__ import annotations

import asyncio
import dataclasses
import mimetypes
import re
import urllib.parse
import uuid
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request, UploadFile
from fastapi.responses import JSONResponse, Response

from vaswani.documents.formats import (
    Document,
    DocumentError,
    DocumentOptions,
    available,
    protections_of,
    read_document,
    settled,
)
from vaswani.documents.spans import Protection
from vaswani.serve.libre import (
    Libre,
    client_of,
    string_fields,
    values,
)
from vaswani.serve.pairs import Routed, language_name
from vaswani.serve.refusals import Refused
from vaswani.serve.worker import served, with_aids
from vaswani.translation.files import combined
from vaswani.translation.pipeline import confident
from vaswani.translation.request import Request as Asked

_UNSAFE = re.compile(r"[^\w.\-]+")


class FileService:
    """The file endpoints over the LibreTranslate pairs of `libre`."""

    def __init__(self, libre: Libre) -> None:
        self.libre, self.settings = libre, libre.settings
        self.storage = libre.access.storage  # where the translated files wait (--shared-storage)

    def add_routes(self, app: FastAPI) -> None:
        app.post("/translate_file")(self.translate_file)
        app.get("/download_file/{name}")(self.download_file)
        app.get("/frontend/settings")(self.frontend_settings)

    async def frontend_settings(self) -> JSONResponse:
        """LibreTranslate's front-end settings: limits, keys, the file formats taken."""
        sources = self.libre.pairs.languages()
        first = sources[0] if sources else {"code": "", "name": "", "targets": [""]}
        keys = self.libre.access.keys is not None
        return JSONResponse(
            {
                "charLimit": self.settings.max_chars,
                "frontendTimeout": 500,
                "apiKeys": keys,
                "keyRequired": keys,
                "suggestions": self.libre.suggestions is not None,
                "filesTranslation": True,
                "supportedFilesFormat": sorted(available()),
                "language": {
                    "source": {"code": first["code"], "name": first["name"]},
                    "target": {
                        "code": first["targets"][0],
                        "name": language_name(first["targets"][0]),
                    },
                },
            }
        )

    async def translate_file(self, request: Request) -> JSONResponse:
        """Translate an uploaded file; the answer says where to download the translation."""
        try:
            return JSONResponse(await self.translated(request))
        except Refused as error:
            return error.answer(libre=True)

    async def translated(self, request: Request) -> dict[str, Any]:
        try:
            form = await request.form(max_files=1, max_fields=16)
        except Exception as error:  # a body that is not multipart form data
            raise Refused("bad_request", f"Invalid request: {error}") from None
        given = values(request.query_params, form)
        fields = string_fields({k: given.get(k) for k in ("source", "target", "api_key")})
        self.libre.access.check(fields.get("api_key"), client_of(request))
        upload = form.get("file")
        if not isinstance(upload, UploadFile) and not hasattr(upload, "read"):
            raise Refused("bad_request", "Invalid request: missing file parameter")
        data = await upload.read(self.settings.max_file_bytes + 1)
        if len(data) > self.settings.max_file_bytes:
            raise Refused("too_large", f"the file is over {self.settings.max_file_bytes:,} bytes")
        filename = safe_name(upload.filename or "file.txt")
        fmt = available().get(Path(filename).suffix.lower())
        if fmt is None:
            known = ", ".join(sorted(available()))
            raise Refused(
                "bad_request", f"Invalid request: {filename}: file format not supported ({known})"
            )
        loop = asyncio.get_running_loop()
        try:
            document = await loop.run_in_executor(
                None, read_document, data, fmt, filename, DocumentOptions()
            )
        except DocumentError as error:
            raise Refused("bad_request", f"Invalid request: {error}") from None
        texts = document.texts()
        chars = sum(len(text) for text in texts)
        if chars > self.settings.max_file_chars:
            raise Refused(
                "bad_request",
                f"Invalid request: {chars:,} characters, over {self.settings.max_file_chars:,}",
            )
        self.libre.access.charge(fields.get("api_key"), chars)  # a key's characters a day
        routed = self.libre.routed(fields, texts)
        translations, alignments = await self.translate_texts(routed, texts, document)
        target = routed.target
        out = await loop.run_in_executor(None, document.rebuild, translations, alignments, target)
        name = self.keep(out, filename)
        return {"translatedFileUrl": f"{str(request.base_url).rstrip('/')}/download_file/{name}"}

    async def translate_texts(
        self, routed: Routed, texts: list[str], document: Document
    ) -> tuple[list[str | None], list[Any]]:
        """A document's texts' translations (sentence by sentence, --max-texts at a time through
        the worker, with its pair's glossary and memory, its code protected as its format says)
        and, for a format with markup, their word alignments. A text whose translation failed a
        check is None in a catalog (left untranslated) and itself elsewhere."""
        decoding = dataclasses.replace(
            self.settings.decoding,
            beam_size=self.settings.beam_size,
            n_best=1,
            batch_tokens=self.settings.batch_tokens,
        )
        protect = [combined(code, Protection()) for code in protections_of(document, texts)]
        asked = Asked(
            target=routed.target,
            decoding=decoding,
            language=routed.source,
            align=document.markup,
            protect=protect,
        )
        request = with_aids(routed.worker, asked)
        done = await served(routed.worker, texts, request, step=self.settings.max_texts)
        found = [confident(mine, None) for mine in done.found]
        return settled(document, texts, found), done.alignments

    def keep(self, data: bytes, filename: str) -> str:
        """Store a translated file for download (--file-ttl seconds); its name, unguessable."""
        name = f"{uuid.uuid4().hex}.{filename}"
        self.storage.put_file(name, filename, data, self.settings.file_ttl_s)
        return name

    async def download_file(self, name: str) -> Any:
        """A translated file, by the name /translate_file gave."""
        found = self.storage.get_file(name)
        if found is None:
            return JSONResponse({"error": "no such file (or it expired)"}, status_code=404)
        filename, data = found
        media = mimetypes.guess_type(filename)[0] or "application/octet-stream"
        quoted = urllib.parse.quote(filename)
        return Response(
            data,
            media_type=media,
            headers={"Content-Disposition": f"attachment; filename*=utf-8''{quoted}"},
        )


def safe_name(filename: str) -> str:
    """The last part of an uploaded file's name, in letters, digits, dots and dashes."""
    base = _UNSAFE.sub("_", Path(filename.replace("\\", "/")).name).strip("._") or "file"
    return base[-100:]
