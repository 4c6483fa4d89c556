"""YAML read with libyaml's C parser, with Kubernetes' meaning of scalars (:mod:`.k8syaml`), bounded.

About ten times faster than the pure-Python parser, with the same results: that matters on the
event loop, where a release's manifest is parsed for every inventory and drift check (profiling
the benchmark found the pure-Python loader taking a fifth of the operator's time). A document
that does not parse is parsed again by the pure-Python loader, for its error: libyaml places some
problems at the end of the stream ("line 2") where the Python parser names the line of the cause.

Every document is hostile until checked. Before anything is built, one pass over the parser's events
(a tenth of the cost of a load) refuses what Go's YAML (helm, kubectl, the API server) refuses:

* **excessive aliasing**, by go-yaml's own rule (a "billion laughs" of a few hundred bytes would
  otherwise expand, wherever the data is copied, serialized or merged, to gigabytes);
* an anchor whose value contains its own alias (a cycle);
* nesting deeper than go-yaml's 10000 levels (libyaml's composer recurses on the C stack: a deeply
  nested flow collection of a few hundred kilobytes crashes the process). libyaml 0.2.6 (PyYAML 6.0.4)
  refuses more than 1000 levels itself; either refusal is reported the same way, and neither is reached
  by any real chart;
* flow collections (``[...]``, ``{...}``) nested deeply *and* long: libyaml's scanner does work in
  proportion to the flow depth for every token, so a few hundred kilobytes of nested brackets hold
  the parser (and the event loop) for seconds. That work is counted and capped.

A document that is JSON (as values and manifests often are) is read by the JSON parser: libyaml takes
over a hundred times longer on large JSON, for the same value.

An alias yields a value of its own, as in Go's YAML: PyYAML hands out the anchored object itself, so a
chart's ``annotations: *labels`` would be the very dict of its labels, and helm's labels added to one
would appear in the other (drift that is not there, and written back by drift correction). Only a
document whose events include an alias is walked for that.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import yaml

from . import k8syaml

Loader = k8syaml.CLoader
Events = yaml.CSafeLoader  # for the parser's events alone (no scalar is resolved)

MAX_DEPTH = 10000  # go-yaml's limit on nested collections
# A document larger than this is loaded in the YAML worker process: libyaml's composer holds the GIL, and a few
# hundred kilobytes of dense YAML already hold the event loop for a noticeable time.
LARGE = 64 << 10
# go-yaml's "excessive aliasing" guard (decode.go allowedAliasRatio): past 100 aliased nodes and 1000
# decoded ones, the share of nodes decoded through an alias may not exceed 99% up to 400,000 decoded
# nodes, falling linearly to 10% at 4,000,000.
_RATIO_LOW, _RATIO_HIGH = 400_000, 4_000_000
FLOW_WORK = 2_000_000  # the sum, over the document's events, of the flow depth they are at (~50 ms of parsing)


class YamlBomb(yaml.YAMLError):
    """A document refused before it is built (aliasing, a cycle, nesting), as Go's YAML refuses it."""

    def __init__(self, problem: str, mark: Any = None) -> None:  # a Mark, from either parser
        super().__init__(problem)
        self.problem, self.problem_mark = problem, mark


def _allowed_ratio(decoded: int) -> float:
    if decoded <= _RATIO_LOW:
        return 0.99
    if decoded >= _RATIO_HIGH:
        return 0.10
    return 0.99 - 0.89 * (decoded - _RATIO_LOW) / (_RATIO_HIGH - _RATIO_LOW)


def check(text: str | bytes) -> bool:
    """YamlBomb if ``text`` would expand or nest beyond what Go's YAML decodes; a syntax error as PyYAML's
    own. Counts as go-yaml does: every node decoded, and every node decoded inside an alias's expansion,
    each anchored collection's expanded size computed once (so the check itself is linear). True when the
    text has an alias (its data must then be :func:`unshared`)."""
    sizes: dict[str, int] = {}  # anchor -> nodes decoded when it is expanded
    open_anchors: set[str] = set()
    stack: list[list[Any]] = []  # open collections: [anchor or None, expanded size so far, flow style]
    decoded = aliased = flow = work = 0
    has_alias = False
    for event in _events(text):
        work += flow
        if work > FLOW_WORK:
            raise YamlBomb("flow collections ([...] or {...}) nested too deeply for the document's length; write "
                           "it in block style or as JSON", event.start_mark)
        if isinstance(event, yaml.DocumentStartEvent):  # anchors and counts are per document
            sizes.clear()
            decoded = aliased = 0
        elif isinstance(event, yaml.AliasEvent):
            has_alias = True
            anchor = str(event.anchor)
            if anchor in open_anchors:
                raise YamlBomb(f"anchor {anchor!r} value contains itself", event.start_mark)
            size = sizes.get(anchor, 0)  # an unknown anchor: the loader names it
            decoded, aliased = decoded + 1 + size, aliased + size
            if aliased > 100 and decoded > 1000 and aliased / decoded > _allowed_ratio(decoded):
                raise YamlBomb("document contains excessive aliasing", event.start_mark)
            if stack:
                stack[-1][1] += 1 + size
        elif isinstance(event, yaml.ScalarEvent):
            decoded += 1
            if event.anchor:
                sizes[str(event.anchor)] = 1
            if stack:
                stack[-1][1] += 1
        elif isinstance(event, yaml.CollectionStartEvent):
            decoded += 1
            if len(stack) >= MAX_DEPTH:
                raise YamlBomb(f"collections nested too deeply (more than {MAX_DEPTH} levels)", event.start_mark)
            if event.anchor:
                open_anchors.add(str(event.anchor))
            stack.append([event.anchor, 1, bool(event.flow_style)])
            flow += bool(event.flow_style)
        elif isinstance(event, yaml.CollectionEndEvent):
            anchor, size, flowing = stack.pop()
            flow -= flowing
            if anchor:
                open_anchors.discard(str(anchor))
                sizes[str(anchor)] = size
            if stack:
                stack[-1][1] += size
    return has_alias


def unshared(data: Any) -> Any:
    """``data`` with every list or dict that appears more than once in it replaced by a copy of its own (an
    alias, or a merge key's values), as Go's YAML decodes each alias anew. Iterative: no recursion limit."""
    seen: set[int] = set()
    root = [data]
    stack: list[list[Any] | dict[Any, Any]] = [root]
    while stack:
        parent = stack.pop()
        for key, value in (parent.items() if isinstance(parent, dict) else enumerate(parent)):
            if not isinstance(value, dict | list):
                continue
            if id(value) in seen:
                value = dict(value) if isinstance(value, dict) else list(value)
                parent[key] = value  # a shallow copy: its own children, if shared, are copied in turn
            seen.add(id(value))
            stack.append(value)
    return root[0]


def _events(text: str | bytes) -> Iterator[yaml.Event]:
    """The parser's events; libyaml's own nesting limit (0.2.6 and later) refused as a bomb, so that the
    document is not handed to the recursive pure-Python parser for a better message."""
    try:
        yield from yaml.parse(text, Loader=Events)
    except yaml.MarkedYAMLError as exc:
        if exc.problem and "maximum nesting depth" in exc.problem:
            raise YamlBomb("collections nested too deeply (more than libyaml's 1000 levels)",
                           exc.problem_mark) from None
        raise


def _json(text: str | bytes) -> tuple[bool, Any]:
    """(True, value) when ``text`` is a JSON document (an object or an array), else (False, None)."""
    head = text.lstrip()[:1]
    if head not in ("{", "[", b"{", b"["):
        return False, None
    try:
        return True, json.loads(text)
    except RecursionError:
        raise YamlBomb("collections nested too deeply (JSON)") from None
    except ValueError:  # YAML that looks like JSON at first (a flow collection): the YAML parser decides
        return False, None


def load(text: str | bytes) -> Any:
    is_json, value = _json(text)
    if is_json:
        return value
    try:
        aliased = check(text)
        data = _all(Loader, text, single=True)
        return unshared(data) if aliased else data
    except YamlBomb:
        raise
    except yaml.YAMLError as exc:
        raise _better(lambda: _all(k8syaml.PyLoader, text, single=True), exc) from None


def load_all(text: str | bytes) -> list[Any]:
    is_json, value = _json(text)
    if is_json:
        return [value]
    try:
        aliased = check(text)
        data = list(_all(Loader, text))
        return unshared(data) if aliased else data
    except YamlBomb:
        raise
    except yaml.YAMLError as exc:
        raise _better(lambda: _all(k8syaml.PyLoader, text), exc) from None


def documents(text: str | bytes) -> list[tuple[yaml.Node, Any]]:
    """(node, data) of each document, checked as :func:`load` checks: the node has the marks (lines) of
    what the data was built from."""
    try:
        aliased = check(text)
        loader = Loader(text)
        try:
            out = []
            while loader.check_node():
                node = loader.get_node()
                if node is not None:
                    data = loader.construct_document(node)
                    out.append((node, unshared(data) if aliased else data))
            return out
        finally:
            loader.dispose()
    except YamlBomb:
        raise
    except yaml.YAMLError as exc:
        raise _better(lambda: _all(k8syaml.PyLoader, text), exc) from None


def _all(loader_class: Any, text: str | bytes, *, single: bool = False) -> Any:
    """Every document's data (or the one document's, ``single``), built by ``loader_class``."""
    loader = loader_class(text)
    try:
        if single:
            return loader.get_single_data()
        out = []
        while loader.check_data():
            out.append(loader.get_data())
        return out
    finally:
        loader.dispose()


def _better(parse: Callable[[], Any], error: yaml.YAMLError) -> yaml.YAMLError:
    """The pure-Python loader's error for a document libyaml refused (it names the line of the cause
    where libyaml may name the end of the stream); libyaml's own when the pure-Python loader cannot
    say (it recurses on deep nesting) or, were libyaml wrong, would accept it: what was not checked
    is not loaded."""
    try:
        parse()
    except yaml.YAMLError as better:
        return better
    except RecursionError:
        pass
    return error
