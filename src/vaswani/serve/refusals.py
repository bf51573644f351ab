"""Every request the server refuses, said once: a `Refused` names why (`WHY`), and this module
alone turns it into an HTTP answer, in vaswani's form (`{"detail": ...}`, as FastAPI answers its
own refusals) or LibreTranslate's (`{"error": ...}`, where a request that breaks a limit is 400,
as LibreTranslate's clients expect)."""

from __future__ import annotations

from fastapi.responses import JSONResponse

from vaswani.errors import VaswaniError

WHY = {
    "invalid": 422,  # the texts or settings break a limit, or name a pair not served
    "bad_request": 400,  # a body that is not what the API takes
    "forbidden": 403,  # a wrong or missing API key, suggestions turned off
    "not_found": 404,  # a translated file that expired
    "too_large": 413,  # more than the server could ever queue or read
    "rate_limited": 429,  # a key's or client's requests a minute or characters a day
    "busy": 503,  # the queue is full now: retry shortly
    "not_ready": 503,  # the model is still loading, or failed its health check
    "timed_out": 504,  # not answered within --timeout
}
"""Why a request is refused, and its HTTP status."""
LIBRE = {"invalid": 400}
"""Where LibreTranslate's API answers another status."""


class Refused(VaswaniError):
    """A request the server does not answer, `why` it (a key of `WHY`), and when to retry."""

    def __init__(self, why: str, message: str, retry_after: int | None = None) -> None:
        super().__init__(message)
        assert why in WHY, why
        self.why, self.message, self.retry_after = why, message, retry_after

    @property
    def status(self) -> int:
        return WHY[self.why]

    def answer(self, libre: bool = False) -> JSONResponse:
        """The HTTP answer: `libre`, LibreTranslate's form and statuses, else vaswani's."""
        headers = {"Retry-After": str(self.retry_after)} if self.retry_after else None
        if libre:
            status = LIBRE.get(self.why, self.status)
            return JSONResponse({"error": self.message}, status_code=status, headers=headers)
        return JSONResponse({"detail": self.message}, status_code=self.status, headers=headers)
