"""Translation around the model: a text's sentences (`segment`), word alignment from the model's
own attention (`align`), glossaries (`glossary`) and translation memories (`memory`)."""
