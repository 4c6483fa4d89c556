"""Log set-up for `helmop run`: text for people, JSON lines for log pipelines, and (``--log-file``) JSON
lines in a file too, rotated, which `helmop logs` reads for an operator that is not a pod.

JSON records carry ``kind``/``namespace``/``name`` when the logging call gave them (as
``extra={"k8s_kind": ..., "k8s_namespace": ..., "k8s_name": ...}``: ``name`` itself is a LogRecord
field) or when kopf's per-object logger did; messages are already free of secret values.
"""

from __future__ import annotations

import json
import logging
import logging.handlers
from typing import Any

_CONTEXT = ("kind", "namespace", "name")  # written as these keys, read from k8s_<key> attributes
FILE_SIZE = 10 << 20  # a log file is rotated past this size, one older file kept


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {"time": self.formatTime(record, "%Y-%m-%dT%H:%M:%S"), "level": record.levelname,
                               "logger": record.name, "message": record.getMessage()}
        for key in _CONTEXT:
            if hasattr(record, f"k8s_{key}"):
                out[key] = getattr(record, f"k8s_{key}")
        k8s = getattr(record, "k8s_ref", None)  # kopf's object loggers
        if isinstance(k8s, dict):
            out.setdefault("kind", k8s.get("kind"))
            out.setdefault("namespace", k8s.get("namespace"))
            out.setdefault("name", k8s.get("name"))
        if record.exc_info:
            out["error"] = self.formatException(record.exc_info)
        return json.dumps(out)


def setup(fmt: str, file: str | None = None) -> None:
    handler = logging.StreamHandler()
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    if file:
        add_file(file)
    root.setLevel(logging.INFO)
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)  # one line per handler call is noise
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def add_file(path: str) -> logging.Handler:
    """JSON lines to ``path`` as well (rotated at FILE_SIZE); the handler, to remove it again."""
    handler = logging.handlers.RotatingFileHandler(path, maxBytes=FILE_SIZE, backupCount=1, encoding="utf-8")
    handler.setFormatter(JsonFormatter())
    logging.getLogger().addHandler(handler)
    return handler
