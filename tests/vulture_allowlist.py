"""Names the dead-code finder (vulture, run by tests/test_architecture.py) cannot see being used."""

from helmop.controllers.operator import Bound

# kopf reads its settings' attributes; helmop only sets them.
_.worker_limit  # type: ignore[name-defined]  # noqa: B018, F821
_.idle_timeout  # type: ignore[name-defined]  # noqa: B018, F821
_.enabled  # type: ignore[name-defined]  # noqa: B018, F821
_.standalone  # type: ignore[name-defined]  # noqa: B018, F821
_.diffbase_storage  # type: ignore[name-defined]  # noqa: B018, F821
# The ports actually bound (when 0 asked for any free one), for whoever embeds the operator (the tests do).
Bound.webhook  # noqa: B018
Bound.metrics  # noqa: B018
# pytest calls the sandbox plugin's hook by name.
from helmop_sandbox import Sandbox, testing  # noqa: E402

testing.pytest_addoption  # noqa: B018
# What the benchmarks read of the sandbox (bench/ is not scanned), and its own tests of its controllers.
Sandbox.requests_served  # noqa: B018
_.cronjob_passes  # type: ignore[name-defined]  # noqa: B018, F821
# Python calls a package's __getattr__ for a name it does not have (the sandbox's lazy Sandbox).
import helmop_sandbox  # noqa: E402

helmop_sandbox.__getattr__  # noqa: B018
# argcomplete reads each argparse action's completer.
_.completer  # type: ignore[name-defined]  # noqa: B018, F821
# Status fields that helmop writes and people, the CLI and other tools read (msgspec encodes them for the API).
from helmop.api.status.app import AppStatus  # noqa: E402
from helmop.api.status.configsync import ConfigSyncStatus  # noqa: E402
from helmop.api.status.helmrelease import HelmReleaseStatus, Snapshot  # noqa: E402
from helmop.api.status.sources import (  # noqa: E402
    Artifact,
    ArtifactGeneratorStatus,
    GitRepositoryStatus,
    HelmChartStatus,
)

AppStatus.helm_release  # noqa: B018
ConfigSyncStatus.last_attempted_revision  # noqa: B018
Snapshot.chart_name, Snapshot.app_version, Snapshot.first_deployed, Snapshot.last_deployed  # noqa: B018
HelmReleaseStatus.last_attempted_generation, HelmReleaseStatus.last_attempted_revision  # noqa: B018
HelmReleaseStatus.readiness_check  # noqa: B018
Artifact.last_update_time, GitRepositoryStatus.last_fetched_at, GitRepositoryStatus.source_verification_mode  # noqa: B018
# set by name (settle.sources.fetched(**observed), as Flux's status records what an artifact was made with)
GitRepositoryStatus.included_artifacts, GitRepositoryStatus.observed_recurse_submodules  # noqa: B018
GitRepositoryStatus.observed_include, GitRepositoryStatus.observed_sparse_checkout  # noqa: B018
HelmChartStatus.observed_source_artifact_revision, HelmChartStatus.observed_chart_name  # noqa: B018
HelmChartStatus.observed_values_files, ArtifactGeneratorStatus.observed_sources_digest  # noqa: B018
# a tar header's fields, read by tarfile when it writes the header
import tarfile  # noqa: E402

tarfile.TarInfo.gid, tarfile.TarInfo.gname, tarfile.TarInfo.uname, tarfile.TarInfo.mtime  # noqa: B018
# RE2's options object: read by the library (a bad expression is not logged to stderr)
from helmop.api.patterns import _OPTIONS  # noqa: E402

_OPTIONS.log_errors  # noqa: B018
# The web UI's templates read these (Jinja2, which vulture does not read)
from helmop.ui.graph import Arrow  # noqa: E402

Arrow.x1, Arrow.y1, Arrow.x2, Arrow.y2  # noqa: B018
# Image automation's statuses: set by name (settle.images, `.but(...)`), read by Flux's tools and kubectl
from helmop.api.status.images import ImageRepositoryStatus, ImageUpdateAutomationStatus, ScanResult  # noqa: E402

ScanResult.tag_count, ScanResult.latest_tags, ScanResult.scan_time  # noqa: B018
ImageRepositoryStatus.canonical_image_name, ImageRepositoryStatus.observed_exclusion_list  # noqa: B018
ImageUpdateAutomationStatus.last_automation_run_time, ImageUpdateAutomationStatus.last_push_time  # noqa: B018
ImageUpdateAutomationStatus.observed_source_revision, ImageUpdateAutomationStatus.observed_policies  # noqa: B018
# what a commit message template reads by name (Go's field names, helmop.images.template)
from helmop.images import automation  # noqa: E402

automation._Object.APIVersion, automation._Change.OldValue, automation._Change.NewValue  # noqa: B018
automation._Change.Setter, automation._Changed.FileChanges, automation._Changed.Objects  # noqa: B018
automation._Changed.Changes, automation._Data.AutomationObject, automation._Data.Changed  # noqa: B018
# A Preview's record of each pull request: written for people and kubectl, never read back
from helmop.api.status.preview import PullRequestPreview  # noqa: E402

PullRequestPreview.base_commit, PullRequestPreview.posted_at  # noqa: B018
# Who asked, and what waits for an approval: written for people, kubectl and `helmop approve`, set with but()
from helmop.api.status import Controlled, Status  # noqa: E402

Status.last_handled_request, Controlled.pending_revision  # noqa: B018
# `helmop mcp`'s tools and prompts: the MCP SDK calls them by the names its decorators register
_.resume  # type: ignore[name-defined]  # noqa: B018, F821
_.pull_request  # type: ignore[name-defined]  # noqa: B018, F821
_.search_docs  # type: ignore[name-defined]  # noqa: B018, F821
