"""LibreTranslate's file API on a vaswani server: upload, download, front-end settings, limits."""

import http.client
import json
import time
import uuid

import pytest

from helpers import Server
from helpers_files import zip_bomb, zipped
from vaswani.serve import Served, ServeSettings, create_app
from vaswani.serve.libre import Access
from vaswani.translation.engine import load_run


@pytest.fixture(scope="module")
def loaded(numbers_run):
    return load_run(numbers_run)


def serve(loaded, **settings) -> Server:
    served = [Served(loaded, "en", "de")]
    access = settings.pop("access", None)
    app = create_app(
        settings=ServeSettings(precision="fp32", **settings), served=served, access=access
    )
    return Server(app)


def upload(server: Server, name: str, data: bytes, query: str = "", **fields) -> tuple[int, dict]:
    """POST /translate_file as LibreTranslate's clients post it: multipart form data (and
    `query`, a query string, whose fields LibreTranslate reads too)."""
    boundary = uuid.uuid4().hex
    fields = fields if query else {"source": "en", "target": "de", **fields}
    parts = [
        f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n'.encode()
        for k, v in fields.items()
    ]
    parts.append(
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="{name}"\r\n'
        "Content-Type: application/octet-stream\r\n\r\n".encode()
        + data
        + b"\r\n"
    )
    body = b"".join(parts) + f"--{boundary}--\r\n".encode()
    headers = {"Content-Type": f"multipart/form-data; boundary={boundary}"}
    return server.request("POST", f"/translate_file{query}", body, headers)


def download(server: Server, url_or_path: str) -> tuple[int, bytes]:
    path = url_or_path.split(f":{server.port}", 1)[-1]
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    connection.request("GET", path)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def test_a_file_is_uploaded_translated_and_downloaded(loaded):
    server = serve(loaded)
    try:
        status, settings = server.request("GET", "/frontend/settings")
        assert status == 200 and settings["filesTranslation"] is True
        assert {".docx", ".po", ".html", ".srt", ".epub"} <= set(settings["supportedFilesFormat"])
        languages = settings["language"]
        assert languages["source"]["name"] == "English", languages  # names, not codes
        assert languages["target"]["name"] == "German", languages
        page = b'<html lang="en"><p>271493. <b>42</b></p><script>var a = "42";</script></html>'
        status, answer = upload(server, "page.html", page)
        assert status == 200, answer
        status, data = download(server, answer["translatedFileUrl"])
        text = data.decode()
        assert status == 200 and text.startswith('<html lang="de"><p>')  # the pair's target
        assert '<script>var a = "42";</script>' in text and "<b>" in text and "271493" not in text
    finally:
        server.stop()


def test_an_apps_resource_files_are_translated_in_their_formats(loaded):
    server = serve(loaded)
    try:
        status, settings = server.request("GET", "/frontend/settings")
        formats = set(settings["supportedFilesFormat"])
        assert {".xml", ".strings", ".json", ".arb", ".yml", ".properties", ".pptx"} <= formats
        android = (
            b'<resources>\n  <string name="a" translatable="false">42</string>\n'
            b'  <plurals name="n">\n    <item quantity="one">%d 42</item>\n'
            b'    <item quantity="other">%d 271493</item>\n  </plurals>\n</resources>\n'
        )
        status, answer = upload(server, "strings.xml", android)
        assert status == 200, answer
        status, data = download(server, answer["translatedFileUrl"])
        text = data.decode()
        assert '<string name="a" translatable="false">42</string>' in text
        assert text.count("%d") == 2 and "271493" not in text  # German: one, other
        status, answer = upload(server, "en.yml", b"en:\n  a: '42'\n  b: 7\n")
        status, data = download(server, answer["translatedFileUrl"])
        assert data.startswith(b"de:\n  a: ") and data.endswith(b"\n  b: 7\n"), data
    finally:
        server.stop()


def test_a_catalog_keeps_its_placeholders_and_takes_its_fields_from_the_query(loaded):
    server = serve(loaded)
    try:
        catalog = (
            b'#, c-format\nmsgid "Copied %s 42 <b>7</b>"\nmsgstr ""\n\n'
            b'#, c-format\nmsgid "42 % d 7"\nmsgstr ""\n\n'  # printf's space flag: c-format only
            b'msgid "_42"\nmsgstr ""\n\nmsgid "7 _42"\nmsgstr ""\n'  # the catalog's accelerator
        )
        status, answer = upload(server, "app.po", catalog, query="?source=en&target=de")
        assert status == 200, answer
        status, data = download(server, answer["translatedFileUrl"])
        msgstrs = [part.split("\n")[0] for part in data.decode().split("msgstr ")[1:]]
        assert status == 200 and len(msgstrs) == 5  # the header and four messages
        assert msgstrs[1].count("%s") == 1 and msgstrs[1].count("<b>") == 1
        assert msgstrs[2].count("% d") == 1
        assert all(m.count("_") == 1 for m in msgstrs[3:]), msgstrs
    finally:
        server.stop()


@pytest.mark.parametrize(
    "path",
    [
        "/download_file/..%2F..%2Fetc%2Fpasswd",
        "/download_file/nothing.txt",
        "/download_file/%2E%2E",
    ],
)
def test_a_download_name_never_reaches_outside_the_files_written(loaded, path):
    server = serve(loaded)
    try:
        status, _ = download(server, path)
        assert status == 404
    finally:
        server.stop()


def test_limits_refuse_bombs_big_files_and_bad_formats_with_a_4xx(loaded, tmp_path):
    server = serve(loaded, max_file_bytes=1 << 20, max_file_chars=50)
    try:
        zip_bomb(tmp_path / "bomb.docx")
        start = time.perf_counter()
        status, answer = upload(server, "bomb.docx", (tmp_path / "bomb.docx").read_bytes())
        assert status == 400 and "zip bomb" in answer["error"]
        assert time.perf_counter() - start < 10
        status, answer = upload(server, "big.txt", b"4" * (2 << 20))
        assert status == 413
        status, answer = upload(server, "long.txt", b"42. " * 100)
        assert status == 400 and "over 50" in answer["error"]
        status, answer = upload(server, "virus.exe", b"MZ")
        assert status == 400 and "not supported" in answer["error"]
        status, answer = upload(server, "bad.html", b"<p><b>never closed</p>")
        assert status == 400 and "never closed" in answer["error"]
        xxe = b'<!DOCTYPE x [<!ENTITY e SYSTEM "file:///etc/passwd">]><x>&e;</x>'
        status, answer = upload(server, "x.docx", zipped({"word/document.xml": xxe}))
        assert status == 400 and "document type declaration" in answer["error"]
    finally:
        server.stop()


def test_api_keys_and_expiry_apply_to_files(loaded):
    server = serve(loaded, access=Access({"k"}, None), file_ttl_s=0.5)
    try:
        status, answer = upload(server, "a.txt", b"42")
        assert status == 403
        status, answer = upload(server, "a.txt", b"42", api_key="k")
        assert status == 200
        time.sleep(1.0)
        status, data = download(server, answer["translatedFileUrl"])
        assert status == 404 and "expired" in json.loads(data)["error"]
    finally:
        server.stop()
