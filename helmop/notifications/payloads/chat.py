"""Chats: Slack (an incoming webhook, or chat.postMessage with a bot token), Discord (its Slack-compatible
endpoint), Rocket.Chat (an incoming webhook: Slack's message), Microsoft Teams (a Workflows webhook: an Adaptive
Card; an Office 365 connector: a MessageCard), Google Chat (a space's webhook: a card)."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit

from helmop.api.notifications import ERROR, Event

from .request import Request, Target, heading, json_request, needs_address, title


def _slack_message(event: Event, target: Target, *, channel: bool) -> dict[str, Any]:
    """A message with one attachment: the object as its author, the message as text, the metadata as fields, the
    colour by severity."""
    attachment = {"color": "danger" if event.severity == ERROR else "good", "author_name": title(event),
                  "text": event.message, "mrkdwn_in": ["text"],
                  "fields": [{"title": k, "value": v, "short": False} for k, v in event.metadata.items()]}
    message: dict[str, Any] = {"username": target.username or "helmop", "attachments": [attachment]}
    if channel and target.channel:
        message["channel"] = target.channel
    return message


def slack(event: Event, target: Target) -> list[Request]:
    headers = {"Authorization": f"Bearer {target.token}"} if target.token else {}
    return [json_request(needs_address(target), _slack_message(event, target, channel=True),
                         {**headers, **target.headers})]


def discord(event: Event, target: Target) -> list[Request]:
    """Discord takes Slack's messages at the webhook's ``/slack`` endpoint (its channel is the webhook's)."""
    address = needs_address(target).rstrip("/")
    url = address if address.endswith("/slack") else f"{address}/slack"
    return [json_request(url, _slack_message(event, target, channel=False), target.headers)]


def rocket(event: Event, target: Target) -> list[Request]:
    """Rocket.Chat's incoming webhook takes Slack's message: the object (its kind in lowercase) as author, red or
    blue, to the channel and as the username given."""
    attachment = {"color": "#FF0000" if event.severity == ERROR else "#0076D7", "author_name": heading(event),
                  "text": event.message, "mrkdwn_in": ["text"],
                  "fields": [{"title": k, "value": v, "short": False} for k, v in event.metadata.items()]}
    message = {"channel": target.channel, "username": target.username, "attachments": [attachment]}
    return [json_request(needs_address(target), message, target.headers)]


def msteams(event: Event, target: Target) -> list[Request]:
    address = needs_address(target)
    facts = list(event.metadata.items())
    if (urlsplit(address).hostname or "").endswith(".webhook.office.com"):  # the retired Office 365 connector
        card: dict[str, Any] = {
            "@type": "MessageCard", "@context": "https://schema.org/extensions",
            "themeColor": "FF0000" if event.severity == ERROR else "0076D7", "summary": title(event),
            "sections": [{"activityTitle": title(event), "activitySubtitle": event.message,
                          "facts": [{"name": k, "value": v} for k, v in facts]}]}
        return [json_request(address, card, target.headers)]
    body: list[dict[str, Any]] = [
        {"type": "TextBlock", "text": title(event), "weight": "bolder", "size": "medium", "wrap": True,
         "color": "attention" if event.severity == ERROR else "good"},
        {"type": "TextBlock", "text": event.message, "wrap": True}]
    if facts:
        body.append({"type": "FactSet", "facts": [{"title": k, "value": v} for k, v in facts]})
    message = {"type": "message", "attachments": [{
        "contentType": "application/vnd.microsoft.card.adaptive", "contentUrl": None,
        "content": {"$schema": "http://adaptivecards.io/schemas/adaptive-card.json", "type": "AdaptiveCard",
                    "version": "1.4", "body": body}}]}
    return [json_request(address, message, target.headers)]


def googlechat(event: Event, target: Target) -> list[Request]:
    """A card (cardsV2) with the object as header, the message, and a labelled line per metadata entry."""
    widgets: list[dict[str, Any]] = [{"textParagraph": {"text": event.message}}]
    widgets += [{"decoratedText": {"topLabel": k, "text": v}} for k, v in event.metadata.items()]
    message = {"cardsV2": [{"cardId": f"{event.uid or event.name}-{event.reason}"[:64], "card": {
        "header": {"title": title(event), "subtitle": f"{event.severity}: {event.reason}"},
        "sections": [{"widgets": widgets}]}}]}
    return [json_request(needs_address(target), message, target.headers)]


BUILDERS = {"slack": slack, "discord": discord, "rocket": rocket, "msteams": msteams, "googlechat": googlechat}
