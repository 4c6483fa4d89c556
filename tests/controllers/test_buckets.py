"""A Bucket end to end: a real S3-compatible server on loopback (moto's), the operator, a ConfigSync applying the
bucket's objects to the sandbox. A changed object publishes a new revision and the ConfigSync applies it; an
unchanged listing publishes nothing and wakes nobody (shown by the reconcile it handled, not by waiting).
`helmop tree` and `trace` follow the Bucket to what it is applied as, and back."""

from __future__ import annotations

import uuid

import yaml

from tests.controllers.conftest import Operator, apply, condition, events, get, helmop, settled, watched
from tests.s3 import ACCESS, S3, SECRET, s3  # noqa: F401 - the fixture
from tests.tools import Run


def note(value: str) -> str:
    return f"apiVersion: v1\nkind: ConfigMap\nmetadata: {{name: from-bucket}}\ndata: {{value: {value}}}\n"


def test_a_configsync_applies_a_bucket_and_follows_its_changes(operator: Operator, kube: Run, ns: str,
                                                               s3: S3) -> None:  # noqa: F811
    name = f"cfg-{uuid.uuid4().hex[:8]}"
    s3.bucket(name, {"apps/note.yaml": note("v1"), "apps/readme.md": "not a manifest"})
    kube("kubectl", "-n", ns, "create", "secret", "generic", "s3", f"--from-literal=accesskey={ACCESS}",
         f"--from-literal=secretkey={SECRET}")
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "Bucket", "metadata": {"name": "cfg"},
                                    "spec": {"bucketName": name, "endpoint": s3.endpoint, "insecure": True,
                                             "secretRef": {"name": "s3"}, "interval": "1h", "ignore": "*.md\n"}}))
    apply(kube, ns, yaml.safe_dump({"apiVersion": "helmop.dev/v1alpha1", "kind": "ConfigSync",
                                    "metadata": {"name": "apps"},
                                    "spec": {"sourceRef": {"kind": "Bucket", "name": "cfg"}, "path": "apps",
                                             "interval": "1h"}}))
    watched(kube, ns, "cm", "from-bucket", lambda obj: (obj or {}).get("data") == {"value": "v1"})
    first = get(kube, ns, "buckets.helmop.dev", "cfg")["status"]
    assert first["artifact"]["revision"].startswith("sha256:") and first["observedIgnore"] == "*.md\n"
    assert SECRET not in str(first) and condition(get(kube, ns, "buckets.helmop.dev", "cfg"))["status"] == "True"

    settled(kube, ns, "buckets.helmop.dev", "cfg")  # listed again, unchanged: nothing new
    assert get(kube, ns, "buckets.helmop.dev", "cfg")["status"]["artifact"] == first["artifact"]
    assert len([e for e in events(kube, ns, "cfg") if e["reason"] == "NewArtifact"]) == 1

    tree = helmop(operator, "tree", "-n", ns, "bucket", "cfg")
    assert tree.returncode == 0 and f"ConfigSync/{ns}/apps" in tree.stdout
    trace = helmop(operator, "trace", "-n", ns, "configmap", "from-bucket")
    assert trace.returncode == 0 and "Bucket" in trace.stdout and first["artifact"]["revision"] in trace.stdout

    s3.put(name, {"apps/note.yaml": note("v2")})
    settled(kube, ns, "buckets.helmop.dev", "cfg")
    assert get(kube, ns, "buckets.helmop.dev", "cfg")["status"]["artifact"]["revision"] != first["artifact"]["revision"]
    watched(kube, ns, "cm", "from-bucket", lambda obj: (obj or {}).get("data") == {"value": "v2"})
