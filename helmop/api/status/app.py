"""An app's status (Jenkins, and the kinds of an apps file): its HelmRelease's, mirrored, and what the
app adds (a Jenkins's URL and admin Secret)."""

from __future__ import annotations

from . import Status


class AppStatus(Status, frozen=True):
    helm_release: str = ""  # the HelmRelease the app owns
    release_name: str = ""
    revision: int = 0
    chart_version: str = ""
    url: str = ""  # Jenkins: where it answers
    admin_secret: str = ""  # Jenkins: the Secret with its admin credentials
