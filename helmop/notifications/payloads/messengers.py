"""Messengers with their own message APIs: Webex (a room's message, Markdown), Telegram (the Bot API's
sendMessage, MarkdownV2), Lark (a bot's message card), Matrix (a room event), Zulip (a stream message, form
encoded) and Zoom Team Chat (an incoming webhook's rich message). Each message is the object, the message and the
metadata, as Flux writes them."""

from __future__ import annotations

import hashlib
import json
from urllib.parse import parse_qsl, quote, urlencode, urlsplit, urlunsplit

from helmop.api.notifications import ERROR, Event

from .request import (
    PayloadError,
    Request,
    Target,
    basic,
    form_request,
    heading,
    json_request,
    markdown_post,
    needs_address,
    needs_token,
)

TELEGRAM = "https://api.telegram.org"
_TELEGRAM_SPECIAL = "\\.-_[]()~>`#+=|{}!*"  # what MarkdownV2 needs escaped


def _needs_channel(target: Target, what: str) -> str:
    if not target.channel:
        raise PayloadError(f"a {target.type} provider needs spec.channel: {what}")
    return target.channel


def webex(event: Event, target: Target) -> list[Request]:
    """POST /v1/messages: Markdown to the room spec.channel names, as the bot whose token it is."""
    text = f"{'💣' if event.severity == ERROR else '✅'} **{heading(event)}**\n{event.message}\n"
    text += "".join(f">**{k}**: {v}\n" for k, v in event.metadata.items())
    message = {"roomId": target.channel, "markdown": text} if target.channel else {"markdown": text}
    return [json_request(needs_address(target), message,
                         {"Authorization": f"Bearer {needs_token(target)}", **target.headers})]


def _telegram_escaped(text: str) -> str:
    return "".join(f"\\{c}" if c in _TELEGRAM_SPECIAL else c for c in text)


def telegram(event: Event, target: Target) -> list[Request]:
    """The Bot API's sendMessage to spec.channel (a chat id, ``@channel``, or ``chat:topic`` for a forum's topic),
    in MarkdownV2. The token is in the URL, as the API takes it; the server is api.telegram.org unless an address
    names another (a self-hosted Bot API server)."""
    emoji = "🚨" if event.severity == ERROR else "💫"
    title = f"{emoji} {event.kind.lower()}/{event.name}/{event.namespace}"
    metadata = "".join(f"\\- *{_telegram_escaped(k)}*: {_telegram_escaped(v)}\n" for k, v in event.metadata.items())
    chat, sep, thread = _needs_channel(target, "a chat id, @channel or chat:topic").partition(":")
    message = {"chat_id": chat, "text": f"*{_telegram_escaped(title)}*\n{_telegram_escaped(event.message)}\n{metadata}",
               "parse_mode": "MarkdownV2", **({"message_thread_id": thread} if sep else {})}
    base = (target.address or TELEGRAM).rstrip("/")
    return [json_request(f"{base}/bot{needs_token(target)}/sendMessage", message, target.headers)]


def lark(event: Event, target: Target) -> list[Request]:
    """A custom bot's interactive message card: the object as a coloured header, the message and the metadata as
    lark_md text."""
    error = event.severity == ERROR
    text = f"**{event.message}**\n\n" + "".join(f"{k}: {v}\n" for k, v in event.metadata.items())
    card = {"config": {"wide_screen_mode": True},
            "header": {"title": {"tag": "plain_text", "content": f"{'🚨' if error else '💫'} {heading(event)}"},
                       "template": "red" if error else "turquoise"},
            "elements": [{"tag": "div", "text": {"tag": "lark_md", "content": text}}]}
    return [json_request(needs_address(target), {"msg_type": "interactive", "card": card}, target.headers)]


def matrix(event: Event, target: Target) -> list[Request]:
    """PUT /_matrix/client/r0/rooms/{room}/send/m.room.message/{txnId}: an m.text message to the room spec.channel
    names, on the homeserver the address names; the transaction id is the event's digest, so a retried request is
    one message."""
    room = _needs_channel(target, "a room id (!room:server)")
    text = f"{'🚨' if event.severity == ERROR else '💫'} {heading(event)}\n{event.message}\n"
    text += "".join(f"- {k}: {v}\n" for k, v in event.metadata.items())
    txn = hashlib.sha1(json.dumps(event.to_json(), sort_keys=True).encode()).hexdigest()
    url = (f"{needs_address(target).rstrip('/')}/_matrix/client/r0/rooms/{quote(room, safe='!:')}/send/"
           f"m.room.message/{txn}")
    request = json_request(url, {"body": text, "msgtype": "m.text"},
                           {"Authorization": f"Bearer {needs_token(target)}", **target.headers})
    return [Request(request.url, request.body, request.headers, method="PUT")]


def zulip(event: Event, target: Target) -> list[Request]:
    """POST /api/v1/messages on the address's server: a stream message to spec.channel's ``channel/topic``, in
    Markdown, as the bot whose email and API key are the Secret's username and password."""
    channel, _, topic = _needs_channel(target, "CHANNEL/TOPIC").partition("/")
    if not channel or not topic:
        raise PayloadError(f"a zulip provider's spec.channel must be CHANNEL/TOPIC, not {target.channel!r}")
    parts = urlsplit(needs_address(target))
    url = urlunsplit((parts.scheme, parts.netloc, "/api/v1/messages", "", ""))
    auth = {"Authorization": basic(target.username, target.password)} if target.username or target.password else {}
    return [form_request(url, {"type": "stream", "to": channel, "topic": topic, "content": markdown_post(event)},
                         {**auth, **target.headers})]


def zoom(event: Event, target: Target) -> list[Request]:
    """An incoming webhook's rich message (``format=full``, unless the address asks another): the object as head,
    the severity as sub head, the message, the metadata as fields; the connection's verification token as the
    Authorization header, as it is."""
    parts = urlsplit(needs_address(target))
    query = parse_qsl(parts.query, keep_blank_values=True)
    if not any(k == "format" and v for k, v in query):
        query = [(k, v) for k, v in query if k != "format"] + [("format", "full")]
    body: list[dict[str, object]] = [{"type": "message", "text": event.message}]
    if event.metadata:
        body.append({"type": "fields", "items": [{"key": k, "value": v} for k, v in event.metadata.items()]})
    message = {"content": {"head": {"text": heading(event), "sub_head": {"text": event.severity}}, "body": body}}
    return [json_request(urlunsplit(parts._replace(query=urlencode(query))), message,
                         {"Authorization": needs_token(target), **target.headers})]


BUILDERS = {"webex": webex, "telegram": telegram, "lark": lark, "matrix": matrix, "zulip": zulip, "zoom": zoom}
