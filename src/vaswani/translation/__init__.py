"""Translation around the model: the `Engine` (a loaded model with its decoding choices made once,
`engine`), the options of one call (`Request`, `request`), the steps from texts to translations
written once (`pipeline`: prepare -> the engine or the server's worker -> finish) and documents
through them (`documents`); a text's sentences (`segment`), word alignment from the model's own
attention (`align`), glossaries (`glossary`), translation memories (`memory`), and the measured
decoding precision (`precision`).

    from vaswani import Engine, Request
    engine = Engine.load("runs/de-en")
    engine.translate(["Das Haus ist klein."], Request(split=False))
"""
