"""A Bucket's spec (helmop.dev/v1alpha1, and Flux's source.toolkit.fluxcd.io/v1): objects of an S3-compatible
bucket as an artifact of config. Field names are Flux's."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .errors import SpecError
from .fields import flag, name_in, optional_text, seconds, text
from .names import check_references
from .settings import SOURCE_INTERVAL

PROVIDERS = ("generic", "aws")  # S3's API, with the Secret's access keys
_ENDPOINT = re.compile(r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$|^\[[0-9A-Fa-f:.]+\](:[0-9]{1,5})?$")
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


@dataclass(frozen=True)
class BucketSpec:
    bucket_name: str
    endpoint: str  # host[:port], no scheme: insecure says http
    provider: str = "generic"
    region: str = ""
    prefix: str = ""
    insecure: bool = False
    secret_ref: str = ""  # accesskey and secretkey
    cert_secret_ref: str = ""
    proxy_secret_ref: str = ""
    ignore: str | None = None
    interval: float = SOURCE_INTERVAL
    timeout: float = 60.0
    suspend: bool = False


def parse_bucket(spec: dict[str, Any]) -> BucketSpec:
    check_references(spec)
    provider = _provider(spec)
    endpoint, bucket = text(spec, "endpoint"), text(spec, "bucketName")
    if not _ENDPOINT.match(endpoint):
        raise SpecError("InvalidSpec", f"spec.endpoint {endpoint[:100]!r} must be host[:port], without a scheme "
                                       "(spec.insecure says plain HTTP)")
    if not _BUCKET.match(bucket):
        raise SpecError("InvalidSpec", f"spec.bucketName {bucket[:100]!r} is not an S3 bucket name")
    prefix = text(spec, "prefix")
    if prefix.startswith("/") or ".." in prefix.split("/") or any(ord(c) < 32 for c in prefix):
        raise SpecError("InvalidSpec", "spec.prefix must be a key prefix inside the bucket")
    return BucketSpec(bucket_name=bucket, endpoint=endpoint, provider=provider, region=text(spec, "region"),
                      prefix=prefix, insecure=flag(spec, "insecure"), secret_ref=name_in(spec, "secretRef"),
                      cert_secret_ref=name_in(spec, "certSecretRef"), proxy_secret_ref=name_in(spec, "proxySecretRef"),
                      ignore=optional_text(spec, "ignore"), interval=seconds(spec, "interval", SOURCE_INTERVAL),
                      timeout=seconds(spec, "timeout", 60.0), suspend=flag(spec, "suspend"))


def _provider(spec: dict[str, Any]) -> str:
    """spec.provider: S3's API with the Secret's access keys; what needs a cloud's identity is refused by name."""
    provider = text(spec, "provider", "generic")
    if provider in ("gcp", "azure"):
        raise SpecError("UnsupportedField", f"spec.provider {provider}: only S3's API (generic, aws) is implemented "
                                            "by helmop; serve the objects through an S3-compatible endpoint")
    if provider not in PROVIDERS:
        raise SpecError("InvalidSpec", "spec.provider must be generic, aws, gcp or azure")
    for field in ("sts", "serviceAccountName"):
        if spec.get(field):
            raise SpecError("UnsupportedField", f"spec.{field} (temporary or workload credentials) is not obtained "
                                                "by helmop; give access keys in spec.secretRef")
    if provider == "aws" and not name_in(spec, "secretRef"):
        raise SpecError("UnsupportedField", "spec.provider aws without spec.secretRef needs the cloud's workload "
                                            "identity, which helmop does not obtain; give access keys in secretRef")
    return provider
