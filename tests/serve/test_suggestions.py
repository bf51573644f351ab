"""LibreTranslate's POST /suggest (`serve --suggestions FILE`), and the suggestions written out as
a TMX that `prepare` and `--memory` read."""

from helpers import Server
from vaswani.cli import main
from vaswani.serve import Served, ServeSettings, create_app
from vaswani.serve.suggestions import Suggestions
from vaswani.translation.engine import load_run
from vaswani.translation.memory import Memory


def test_suggestions_are_stored_and_written_out_as_tmx(numbers_run, tmp_path, capsys):
    served = [Served(load_run(numbers_run), "en", "de")]
    off = Server(create_app(settings=ServeSettings(precision="fp32"), served=served))
    try:
        status, body = off.request(
            "POST", "/suggest", {"q": "a", "s": "b", "source": "en", "target": "de"}
        )
        assert status == 403 and body["error"] == "Suggestions are disabled on this server."
        assert off.request("GET", "/frontend/settings")[1]["suggestions"] is False
    finally:
        off.stop()

    db = tmp_path / "suggestions.db"
    app = create_app(
        settings=ServeSettings(precision="fp32"), served=served, suggestions=Suggestions(db)
    )
    server = Server(app)
    try:
        assert server.request("GET", "/frontend/settings")[1]["suggestions"] is True
        pairs = [("forty two", "zweiundvierzig <&> ok"), ("seven", "sieben")]
        for text, better in pairs:
            asked = {"q": text, "s": better, "source": "en", "target": "de"}
            assert server.request("POST", "/suggest", asked) == (200, {"success": True})
        status, body = server.request(
            "POST", "/suggest", {"q": "x", "s": "", "source": "en", "target": "de"}
        )
        assert status == 400 and "give q" in body["error"]
        status, body = server.request(
            "POST", "/suggest", {"q": "x", "s": "y", "source": "en", "target": "fr"}
        )
        assert status == 400 and "not served" in body["error"]
    finally:
        server.stop()

    out = tmp_path / "suggested.tmx"
    assert main(["suggestions", str(db), "--tmx", str(out)]) == 0
    said = capsys.readouterr().out
    assert "en:de  2 suggestions" in said and "wrote 2 translation units" in said
    memory = Memory.read([out], "en", "de")  # what --memory reads
    assert memory.exact(["forty two"])[0][0].text == "zweiundvierzig <&> ok"
    data = tmp_path / "data"
    args = ["prepare", str(out), "--out", str(data), "--src-lang", "en", "--tgt-lang", "de"]
    assert (
        main([*args, "--valid-fraction", "0", "--test-fraction", "0", "--vocab-size", "300"]) == 0
    )
