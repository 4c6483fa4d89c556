"""Reading a Helm repository index (``index.yaml``) in bounded memory.

A large repository's index is tens of megabytes; loading it as a YAML document builds the whole node
tree and then every entry's full mapping (about 30 times the file's size: 1 GB for a 31 MB index).
Resolution needs three fields of each entry, so the index is read as a stream of YAML events from
the C parser (libyaml) and only those fields are kept: memory stays near the size of what is kept,
whatever the size of the file. Scalars stay the strings they are in the file (``version: 1.10`` is
not the float 1.1). Runs in a worker thread: it is CPU work the event loop must not wait for.

The parser is given the whole body as bytes (bounded by the caller's size cap), not a file: fed from
a stream, libyaml's parser keeps the GIL for hundreds of milliseconds at a time (measured: 0.6-1 s
for a 31 MB index), which would stall the event loop as surely as parsing on it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO

import yaml

from helmop.api import yamlc

_KEPT = ("version", "digest")


@dataclass(frozen=True)
class Entry:
    """What resolution and download need of one chart version."""

    version: str
    urls: tuple[str, ...] = ()
    digest: str = ""


class IndexInvalid(ValueError):
    """Not a Helm repository index (not YAML, or no ``entries`` mapping)."""


def parse(source: IO[bytes]) -> dict[str, list[Entry]]:
    """The charts of an index read from ``source``: name -> its versions, in the file's order."""
    body = source.read()
    try:
        return _Reader(yaml.parse(body, Loader=yamlc.Events)).document()
    except yaml.YAMLError as exc:
        raise IndexInvalid(f"not valid YAML: {exc}") from None


class _Reader:
    def __init__(self, events: Iterator[yaml.Event]) -> None:
        self.events = events
        self.styles: list[bool] = []  # of the open collections: flow style or not
        self.flow = self.work = 0  # open flow collections; their depth summed over the events so far

    def next(self) -> yaml.Event:
        try:
            event = next(self.events)
        except StopIteration:
            raise IndexInvalid("the document ends early") from None
        # libyaml works in proportion to the flow depth for each token: a hostile index nesting [[[...]]]
        # would hold a thread for minutes (helm writes block style: its work here stays 0)
        if isinstance(event, yaml.CollectionStartEvent):
            self.styles.append(bool(event.flow_style))
            self.flow += self.styles[-1]
        elif isinstance(event, yaml.CollectionEndEvent) and self.styles:
            self.flow -= self.styles.pop()
        self.work += self.flow
        if self.work > yamlc.FLOW_WORK * 10:
            raise IndexInvalid("flow collections nested too deeply for the file's length")
        return event

    def skip(self, event: yaml.Event) -> None:
        """Consume the rest of the node ``event`` starts."""
        depth = 1 if isinstance(event, yaml.CollectionStartEvent) else 0
        while depth:
            event = self.next()
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1

    def keys(self) -> Iterator[str]:
        """Keys of the mapping just opened; the caller consumes (or skips) each value."""
        while True:
            event = self.next()
            if isinstance(event, yaml.MappingEndEvent):
                return
            if isinstance(event, yaml.ScalarEvent):
                yield event.value
            else:  # a complex key: not something an index has
                self.skip(event)
                self.skip(self.next())

    def document(self) -> dict[str, list[Entry]]:
        event = self.next()
        while not isinstance(event, yaml.NodeEvent):
            if isinstance(event, yaml.StreamEndEvent):
                raise IndexInvalid("the file is empty")
            event = self.next()
        if not isinstance(event, yaml.MappingStartEvent):
            raise IndexInvalid("the document is not a mapping")
        charts: dict[str, list[Entry]] | None = None
        for key in self.keys():
            value = self.next()
            if key == "entries" and isinstance(value, yaml.MappingStartEvent):
                charts = self.entries()
            else:
                self.skip(value)
        if charts is None:
            raise IndexInvalid("it has no entries mapping")
        return charts

    def entries(self) -> dict[str, list[Entry]]:
        charts: dict[str, list[Entry]] = {}
        for name in self.keys():
            value = self.next()
            versions = charts.setdefault(name, [])
            if not isinstance(value, yaml.SequenceStartEvent):
                self.skip(value)  # `name: null` or anything else: no versions
                continue
            while not isinstance(event := self.next(), yaml.SequenceEndEvent):
                if isinstance(event, yaml.MappingStartEvent):
                    versions.append(self.entry())
                else:
                    self.skip(event)
        return charts

    def entry(self) -> Entry:
        fields: dict[str, str] = {}
        urls: list[str] = []
        for key in self.keys():
            value = self.next()
            if key in _KEPT and isinstance(value, yaml.ScalarEvent):
                fields[key] = value.value
            elif key == "urls" and isinstance(value, yaml.SequenceStartEvent):
                while not isinstance(item := self.next(), yaml.SequenceEndEvent):
                    if isinstance(item, yaml.ScalarEvent):
                        urls.append(item.value)
                    else:
                        self.skip(item)
            else:
                self.skip(value)
        return Entry(fields.get("version", ""), tuple(urls), fields.get("digest", ""))
