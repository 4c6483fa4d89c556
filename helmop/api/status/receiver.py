"""A Receiver's status: Flux's, with the webhook path a sender is given."""

from __future__ import annotations

from . import Status


class ReceiverStatus(Status, frozen=True):
    webhook_path: str = ""  # /hook/<sha256(token + name + namespace)>; empty until the token is read
