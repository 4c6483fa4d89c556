"""Image automation on the command line, in Flux's words: ``get images`` (the three kinds), ``create image
repository|policy|update NAME``, and ``reconcile|suspend|resume image repository|policy|update NAME``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from .errors import Failed

VERBS = ("reconcile", "suspend", "resume")  # `create image ...` is a verb of its own (:func:`nest`)
# Flux's words -> the kind's alias (as `helmop reconcile imgrepo NAME` says it)
FORMS = {"repository": "imagerepository", "policy": "imagepolicy", "update": "imageupdateautomation"}


def normalized(argv: list[str]) -> list[str]:
    """``VERB image repository NAME`` as ``VERB imagerepository NAME`` (and policy, update)."""
    for i, word in enumerate(argv[:-2]):
        if word in VERBS and argv[i + 1] == "image" and argv[i + 2] in FORMS:
            return [*argv[:i + 1], FORMS[argv[i + 2]], *argv[i + 3:]]
        if not word.startswith("-"):
            break
    return argv


def nest(verbs: Any) -> Callable[[str, str], argparse.ArgumentParser]:
    """``create image``, whose sub-verbs (repository, policy, update) the returned function adds."""
    image = verbs.add_parser("image", help="an ImageRepository, ImagePolicy or ImageUpdateAutomation")
    forms = image.add_subparsers(dest="create_image", required=True, metavar="repository|policy|update")

    def add(word: str, kind: str) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = forms.add_parser(word, help=f"an {kind}")
        return parser

    return add


def repository_spec(args: argparse.Namespace) -> dict[str, Any]:
    spec: dict[str, Any] = {"image": args.image, "interval": args.interval}
    optional = {"secretRef": {"name": args.secret_ref} if args.secret_ref else None,
                "certSecretRef": {"name": args.cert_secret_ref} if args.cert_secret_ref else None,
                "insecure": args.insecure or None, "timeout": args.timeout, "exclusionList": args.exclusion}
    return spec | {k: v for k, v in optional.items() if v}


def policy_spec(args: argparse.Namespace) -> dict[str, Any]:
    chosen = [(kind, value) for kind, value in (("semver", args.select_semver), ("alphabetical", args.select_alpha),
                                                 ("numerical", args.select_numeric)) if value]
    if len(chosen) != 1:
        raise Failed("give one of --select-semver, --select-alpha or --select-numeric")
    kind, value = chosen[0]
    spec: dict[str, Any] = {"imageRepositoryRef": {"name": args.image_ref},
                            "policy": {kind: {"range": value} if kind == "semver" else {"order": value}}}
    if args.filter_regex:
        spec["filterTags"] = {"pattern": args.filter_regex,
                              **({"extract": args.filter_extract} if args.filter_extract else {})}
    if args.reflect_digest:
        spec["digestReflectionPolicy"] = args.reflect_digest
        if args.reflect_digest == "Always":
            spec["interval"] = args.interval
    return spec


def update_spec(args: argparse.Namespace) -> dict[str, Any]:
    commit: dict[str, Any] = {"author": {"email": args.author_email,
                                         **({"name": args.author_name} if args.author_name else {})}}
    if args.commit_template:
        commit["messageTemplate"] = args.commit_template
    if args.signing_key:
        commit["signingKey"] = {"secretRef": {"name": args.signing_key}, "type": args.signing_type}
    git: dict[str, Any] = {"commit": commit}
    if args.checkout_branch:
        git["checkout"] = {"ref": {"branch": args.checkout_branch}}
    if args.push_branch:
        git["push"] = {"branch": args.push_branch}
    return {"sourceRef": {"kind": "GitRepository", "name": args.git_repo_ref}, "interval": args.interval,
            "git": git, "update": {"path": args.path, "strategy": "Setters"}}


def repository_flags(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--image", required=True, help="the image repository, without a tag (ghcr.io/org/app)")
    sub.add_argument("--secret-ref", metavar="NAME", help="a dockerconfigjson Secret with the registry's login")
    sub.add_argument("--cert-secret-ref", metavar="NAME", help="a Secret with ca.crt, the registry's CA")
    sub.add_argument("--insecure", action="store_true", help="plain HTTP to the registry")
    sub.add_argument("--timeout", help="how long a scan may take (a duration: 60s)")
    sub.add_argument("--exclusion", action="append", metavar="REGEX", help="tags left out (repeatable; default "
                                                                           "^.*\\.sig$)")


def policy_flags(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--image-ref", required=True, metavar="NAME", help="the ImageRepository whose tags it chooses "
                                                                        "from")
    sub.add_argument("--select-semver", metavar="RANGE", help="the highest version in this range (1.x, ^1.2)")
    sub.add_argument("--select-alpha", choices=("asc", "desc"), help="the last tag in alphabetical order (desc: "
                                                                     "the first)")
    sub.add_argument("--select-numeric", choices=("asc", "desc"), help="the highest number (desc: the lowest)")
    sub.add_argument("--filter-regex", metavar="REGEX", help="only tags it matches")
    sub.add_argument("--filter-extract", metavar="TEMPLATE", help="what of them is ordered ($1, ${name})")
    sub.add_argument("--reflect-digest", choices=("Never", "IfNotPresent", "Always"),
                     help="look up the chosen tag's digest")


def update_flags(sub: argparse.ArgumentParser) -> None:
    sub.add_argument("--git-repo-ref", required=True, metavar="NAME", help="the GitRepository to update")
    sub.add_argument("--author-email", required=True, help="the commits' author")
    sub.add_argument("--author-name", help="the commits' author's name")
    sub.add_argument("--checkout-branch", help="the branch updated (default: the GitRepository's ref)")
    sub.add_argument("--push-branch", help="the branch pushed to (default: the one checked out)")
    sub.add_argument("--commit-template", metavar="TEMPLATE", help="the commit message (a Go template)")
    sub.add_argument("--signing-key", metavar="SECRET", help="sign the commits with this Secret's key")
    sub.add_argument("--signing-type", choices=("gpg", "ssh"), default="gpg", help="the key's kind (default gpg)")
    sub.add_argument("--path", default="./", help="the folder whose markers are set (default the root)")


FLAGS = {"imagerepo": repository_flags, "imagepolicy": policy_flags, "imageupdate": update_flags}
