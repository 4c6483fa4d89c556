"""The web UI (``helmop ui``): the state of every helmop resource at a glance, live, with the viewer's own rights.

Server-rendered HTML (aiohttp and Jinja2, both kept well on PyPI) with one small script, and no build step:
every page reads complete without JavaScript (the script only makes pages live, by server-sent events), the
assets ship inside the package (no fonts or scripts from the internet), a page weighs a few kilobytes, and a
CSP without inline code holds. A single-page app would need an npm build in the set-up and its output kept
reproducible, for no page this UI needs.
"""

from .server import serve

__all__ = ["serve"]
