"""One turn of one object, as every kind's controller receives it: the object's key, a typed view of its body,
its status read once and its spec read once (by the kind's reader, :mod:`helmop.decisions.specs`), and what a
turn writes and says bound to it. The dispatcher (:mod:`.handlers`) builds it and owns what every kind does
alike before and after: a refused spec, a suspension, an API error, an exception nobody foresaw, the memory
released after a clean-up."""

from __future__ import annotations

import logging
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar, cast

from helmop.api.errors import HelmopError, SpecError
from helmop.api.images import FLUX_IMAGE_KINDS, HELMOP_IMAGES, ImageKinds
from helmop.api.kinds import Family, Kind, family_of
from helmop.api.kubeconfigs import KubeConfigRef
from helmop.api.objects import ObjectKey, Resource
from helmop.api.redaction import redact
from helmop.api.status import Status
from helmop.sources.credentials import credentials
from helmop.sources.errors import SourceError
from helmop.sources.repositories import Credentials

from . import clusters
from .clusters import Cluster
from .context import Context
from .outcome import DONE, FAILED, Outcome
from .status import Source, published, report, write_status

SpecT = TypeVar("SpecT")
StatusT = TypeVar("StatusT", bound=Status)
T = TypeVar("T")


class _Named(logging.LoggerAdapter[logging.Logger]):
    """A logger whose lines start with the object they are about."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        return f"{(self.extra or {}).get('object')}: {msg}", kwargs


@dataclass(frozen=True)
class Said:
    """Events about one object (the recorder's, bound to it)."""

    ctx: Context
    body: dict[str, Any]

    async def normal(self, reason: str, message: str) -> None:
        await self.ctx.services.events.normal(self.body, reason, message)

    async def warning(self, reason: str, message: str) -> None:
        await self.ctx.services.events.warning(self.body, reason, message)

    async def post(self, type_: str, reason: str, message: str) -> None:
        await self.ctx.services.events.post(self.body, type_, reason, message)


@dataclass
class Turn(Generic[SpecT, StatusT]):
    """``status`` is the status as read at the start, then as the turn last wrote it (each write hands on the
    new one)."""

    ctx: Context
    kind: Kind
    body: dict[str, Any]
    spec: SpecT
    status: StatusT
    this: Resource = field(init=False)
    key: ObjectKey = field(init=False)
    log: logging.LoggerAdapter[logging.Logger] = field(init=False)
    events: Said = field(init=False)

    def __post_init__(self) -> None:
        self.this = Resource(self.body)
        self.key = ObjectKey(self.kind.key, self.this.namespace, self.this.name)
        where = f"{self.this.namespace}/{self.this.name}" if self.this.namespace else self.this.name
        self.log = _Named(logging.getLogger(f"helmop.{self.kind.kind.lower()}"),
                          {"object": f"{self.kind.kind} {where}"})
        self.events = Said(self.ctx, self.body)

    @property
    def namespace(self) -> str:
        return self.this.namespace

    @property
    def name(self) -> str:
        return self.this.name

    @property
    def generation(self) -> int:
        return self.this.generation

    @property
    def family(self) -> Family:
        """The family of kinds this one's sources and dependencies are of (helmop's, or Flux's)."""
        return family_of(self.kind.group)

    @property
    def images(self) -> ImageKinds:
        """Image automation's kinds of the same family."""
        return FLUX_IMAGE_KINDS if self.kind.flux else HELMOP_IMAGES

    def refer(self, targets: list[ObjectKey]) -> None:
        """This object reads ``targets``: a change of one wakes it."""
        self.ctx.memory.refer(self.key, targets)

    def secrets_named(self, *names: str) -> list[ObjectKey]:
        """The Secrets of its namespace a spec names ("" for none)."""
        return [ObjectKey("Secret", self.namespace, name) for name in names if name]

    def refer_secrets(self, *names: str) -> None:
        """This object reads these Secrets of its namespace ("" for none): a change of one wakes it."""
        self.refer(self.secrets_named(*names))

    def read_secrets(self, values: list[str]) -> None:
        """The secret strings this turn read: masked in whatever is reported of it."""
        self.ctx.memory.secrets[self.key] = values

    async def credentials(self, secret_ref: str, cert_secret_ref: str, verify_secret_ref: str = "",
                          proxy_secret_ref: str = "") -> Credentials:
        """The credentials a chart source's spec names ("" for none; the verification's Secret is read by the
        verification): a change of one of those Secrets wakes the object, and their strings are masked in whatever
        is reported of it."""
        self.refer_secrets(secret_ref, cert_secret_ref, verify_secret_ref, proxy_secret_ref)
        creds = await credentials(self.ctx.services.kube, self.namespace, secret_ref, "spec", cert_secret_ref,
                                  proxy_secret_ref)
        self.read_secrets(creds.secrets())
        return creds

    async def read_other(self, kind: Kind, namespace: str, name: str, parse: Callable[[dict[str, Any]], T],
                         reason: str, *, invalid_transient: bool) -> tuple[T, dict[str, Any]]:
        """An object of another kind this one reads (its spec parsed, and the object): SourceError ``reason`` when
        it is not there (transient: it may come) or its spec is refused (``invalid_transient``: whether its own
        controller's fix is awaited)."""
        obj = await self.ctx.services.kube.get(kind.path(namespace, name))
        what = f"{kind.kind} {namespace}/{name}"
        if obj is None:
            raise SourceError(reason, f"{what} does not exist", transient=True)
        try:
            return parse(obj.get("spec") or {}), obj
        except SpecError as exc:
            raise SourceError(reason, f"{what}: {exc}", transient=invalid_transient) from None

    def masked(self, message: str) -> str:
        return redact(message, self.ctx.memory.secrets.get(self.key, []))

    async def cluster(self, ref: KubeConfigRef | None) -> Cluster:
        """The cluster this object acts on: the operator's own, or the one its ``spec.kubeConfig`` names."""
        return await clusters.target(self.ctx, self.key, ref)

    async def write(self, status: StatusT, *, outcome: bool = True) -> bool:
        """``status`` written when it changed (True then); the turn's status from now on."""
        self.status = status
        return await write_status(self.ctx, self.kind, self.body, status, outcome=outcome)

    async def report(self, ready: bool, reason: str, message: str, *, stalled: bool = False,
                     event: bool = True) -> None:
        """An outcome on the turn's status (Ready, Stalled) and its Event, masked of the secrets the turn read."""
        await report(self.ctx, self.kind, self.body, self.status, ready, reason, self.masked(message),
                     stalled=stalled, event=event)

    async def failed(self, exc: HelmopError) -> Outcome:
        """An error of the turn's inputs reported: a transient one is tried again after the backoff, any other
        stalls the object until its spec or inputs change."""
        await self.report(False, exc.reason, str(exc), stalled=not exc.transient)
        return FAILED if exc.transient else DONE

    async def publish(self, after: StatusT, message: str, *, stops_readers: bool = True) -> None:
        """A source's new status (:func:`.status.published`)."""
        await published(self.ctx, self.kind, self.body, cast(Source, self.status), cast(Source, after), message,
                        stops_readers=stops_readers)
        self.status = after
