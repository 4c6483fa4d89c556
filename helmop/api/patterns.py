"""Regular expressions a spec gives (Alerts' inclusion lists, cosign's matchOIDCIdentity): RE2, Go's syntax as
Flux's, linear in what they are matched against, bounded in length; a bad one refused with where it stands."""

from __future__ import annotations

from typing import Any

import re2

from .errors import SpecError

MAX_LENGTH = 1024  # characters of one expression

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a tenant's bad expression is said in its status, not written to the operator's stderr


def compile_pattern(text: Any, where: str) -> Any:
    """``text`` compiled (``where`` names it in the refusal); SpecError when it is not an RE2 expression."""
    if not isinstance(text, str) or len(text) > MAX_LENGTH:
        raise SpecError("InvalidSpec", f"{where} must be a regular expression of at most {MAX_LENGTH} characters")
    try:
        return re2.compile(text, _OPTIONS)
    except re2.error as exc:
        problem = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise SpecError("InvalidSpec", f"{where} is not a regular expression (RE2 syntax): {problem}") from None
