"""--chart-mirror and --git-mirror: a URL that starts with FROM is fetched from TO instead, so a repository written
for the public internet runs unchanged behind a mirror; what status says keeps the URL it was written with."""

from __future__ import annotations


def mirrored(url: str, mirrors: tuple[tuple[str, str], ...]) -> str:
    """``url`` as fetched: the longest FROM it starts with (at a path boundary) replaced by its TO."""
    for source, target in sorted(mirrors, key=lambda mirror: -len(mirror[0])):
        rest = url[len(source):]
        if url.startswith(source) and (not rest or source.endswith("/") or rest[0] in "/?#:"):
            return target + rest
    return url
