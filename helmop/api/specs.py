"""Each of helmop's kinds' spec parsers, called as the operator reads a spec: ``(spec, name, namespace)``. One
table for the offline checks that must agree with the operator (``helmop create``, ``helmop convert``)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .buckets import parse_bucket
from .generators import parse_artifact_generator, parse_external_artifact
from .helmcharts import parse_helm_chart
from .helmrelease import parse_spec
from .images import parse_image_policy, parse_image_repository, parse_image_update_automation
from .notifications import parse_alert, parse_provider
from .receivers import parse_receiver
from .repositories import parse_helm_repository, parse_oci_repository
from .sources import parse_config_sync, parse_git_repository

PARSERS: dict[str, Callable[[dict[str, Any], str, str], object]] = {
    "HelmRelease": lambda spec, name, namespace: parse_spec(spec, name, namespace),
    "GitRepository": lambda spec, _name, _namespace: parse_git_repository(spec),
    "HelmRepository": lambda spec, _name, _namespace: parse_helm_repository(spec),
    "OCIRepository": lambda spec, _name, _namespace: parse_oci_repository(spec),
    "Bucket": lambda spec, _name, _namespace: parse_bucket(spec),
    "HelmChart": lambda spec, _name, _namespace: parse_helm_chart(spec),
    "ExternalArtifact": lambda spec, _name, _namespace: parse_external_artifact(spec),
    "ArtifactGenerator": lambda spec, _name, _namespace: parse_artifact_generator(spec),
    "ConfigSync": lambda spec, name, namespace: parse_config_sync(spec, name, namespace),
    "Provider": lambda spec, _name, _namespace: parse_provider(spec),
    "Alert": lambda spec, _name, namespace: parse_alert(spec, namespace),
    "Receiver": lambda spec, _name, _namespace: parse_receiver(spec, flux=False),
    "ImageRepository": lambda spec, _name, _namespace: parse_image_repository(spec),
    "ImagePolicy": lambda spec, _name, _namespace: parse_image_policy(spec),
    "ImageUpdateAutomation": lambda spec, _name, _namespace: parse_image_update_automation(spec),
}
