"""The JSON bodies of the endpoints (pydantic models, validated strictly) and the settings
of a generate request."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from vaswani.config import MAX_BEAM_SIZE

# Request bodies are typed strictly: "2" and true are not beam sizes, NaN and infinity are not
# numbers, and an unknown field is an error rather than ignored.
STRICT = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
INT32 = 2**31 - 1  # the largest count a request may give (a server limit is then applied)


class TextsRequest(BaseModel):
    """One text (`text`) or several (`texts`): what /translate and /classify take."""

    model_config = STRICT
    text: str | None = Field(default=None, description="one text")
    texts: list[str] | None = Field(default=None, description="several texts, answered in order")

    @model_validator(mode="after")
    def one_of_text_or_texts(self) -> TextsRequest:
        if (self.text is None) == (self.texts is None):
            raise ValueError('give exactly one of "text" and "texts"')
        return self

    def all_texts(self) -> list[str]:
        return [self.text] if self.texts is None else self.texts


class TranslateRequest(TextsRequest):
    """One sentence (`text`) or several (`texts`), and optional search settings."""

    beam_size: int | None = Field(
        default=None, ge=1, le=MAX_BEAM_SIZE, description="1 = greedy search"
    )
    max_length: int | None = Field(default=None, ge=1, le=INT32, description="most output tokens")
    source: str | None = Field(default=None, description="source language, with several models")
    stream: bool = Field(
        default=False,
        description="answer as server-sent events (text/event-stream), one a sentence, in order",
    )
    target: str | None = Field(default=None, description="target language, with several models")
    split: bool = Field(
        default=True,
        description="translate a text of several sentences sentence by sentence (false: whole)",
    )
    alignments: bool = Field(
        default=False,
        description="also answer each translation's word alignment (Pharaoh pairs SRC-TGT)",
    )
    glossary: dict[str, str] | None = Field(
        default=None,
        description='terms whose translation is prescribed, {"source term": "target term"}; '
        "added to the server's glossary (and winning over it)",
        max_length=10_000,
    )


class TranslateResponse(BaseModel):
    translations: list[str]
    confidences: list[float]
    """Each translation's confidence in [0, 1]: the run's calibrated estimate of its chrF / 100
    (the mean probability per token for a run without a calibration); 1 for a blank text or a
    translation memory's answer."""
    alignments: list[str] | None = None
    """With "alignments": true, each translation's word alignment: `0-0 1-2 ...`, source word
    - translated word, over whitespace-separated words."""
    origins: list[str] | None = None
    """With a translation memory: "memory" for a text answered from it, else "model"."""
    fuzzy_matches: list[dict[str, Any] | None] | None = None
    """With a fuzzy threshold: each text's best fuzzy match in the memory (score, source, target)."""
    terms: list[list[dict[str, Any]]] | None = None
    """With a glossary: each text's terms (source, target, placed)."""
    unsafe: list[str | None] | None = None
    """Where a translation failed a check (a placeholder, markup, the accelerator, a line
    break: the name of the check), which text came back as it was; absent when none did."""
    beam_size: int
    seconds: float
    pivot: str | None = None
    """The middle language of a pair no model serves, translated through two that chain."""


class GenerateRequest(BaseModel):
    """One prompt or several, and how to sample their continuations."""

    model_config = STRICT
    prompt: str | None = Field(default=None, description='one prompt ("" starts from nothing)')
    prompts: list[str] | None = Field(default=None, description="several prompts, in order")
    max_new_tokens: int = Field(default=100, ge=1, le=INT32, description="most tokens to generate")
    temperature: float = Field(default=1.0, ge=0.0, description="0 takes the most probable token")
    top_k: int = Field(
        default=0, ge=0, le=INT32, description="draw from the k most probable; 0 = all"
    )
    top_p: float = Field(default=1.0, gt=0.0, le=1.0, description="nucleus: probability kept")
    seed: int = Field(default=0, ge=0, le=2**62, description="prompt i is sampled with seed + i")

    @model_validator(mode="after")
    def one_of_prompt_or_prompts(self) -> GenerateRequest:
        if (self.prompt is None) == (self.prompts is None):
            raise ValueError('give exactly one of "prompt" and "prompts"')
        return self


class GenerationOut(BaseModel):
    prompt: str
    text: str
    tokens: int
    finished: bool


class GenerateResponse(BaseModel):
    generations: list[GenerationOut]
    seconds: float


class ClassificationOut(BaseModel):
    label: str
    probability: float
    probabilities: dict[str, float]


class ClassifyResponse(BaseModel):
    labels: list[ClassificationOut | None] = Field(description="null for a blank text")
    seconds: float


MAX_DEPTH = 16
"""Deepest nesting of arrays and objects a request body may have (the deepest valid request
nests 2)."""


class BodyError(ValueError):
    """A request body that is not JSON, or nests deeper than MAX_DEPTH."""


def json_body(body: bytes) -> Any:
    """A JSON request body; lone surrogates are kept (to be refused by name later, as text that
    is not valid Unicode). A body that is not JSON or nests too deeply raises BodyError, whose
    message says which."""
    too_deep = BodyError(f"the body nests arrays or objects deeper than {MAX_DEPTH} levels")
    try:
        data = json.loads(body.decode("utf-8", "surrogatepass"))
    except ValueError as error:  # not UTF-8, not JSON, an int of 5,000 digits
        raise BodyError(f"the body is not JSON ({str(error)[:200]})") from None
    except RecursionError:  # the parser recurses once a level and gives up near 1,000
        raise too_deep from None
    if nesting(data) > MAX_DEPTH:
        raise too_deep
    return data


def nesting(data: Any) -> int:
    """How deeply arrays and objects nest in parsed JSON (a scalar: 0), without recursing."""
    deepest, todo = 0, [(data, 1)] if isinstance(data, (dict, list)) else []
    while todo:
        item, depth = todo.pop()
        deepest = max(deepest, depth)
        children = item.values() if isinstance(item, dict) else item
        todo.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return deepest
