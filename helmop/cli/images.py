"""Image automation on the command line, in Flux's words: ``get images`` (the three kinds), ``create image
repository|policy|update NAME``, and ``reconcile|suspend|resume image repository|policy|update NAME``."""

from __future__ import annotations

import argparse
from typing import Any

from .argtree import arg
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


def nest(verbs: argparse._SubParsersAction[argparse.ArgumentParser]) -> argparse._SubParsersAction[
        argparse.ArgumentParser]:
    """``create image``, whose sub-verbs (repository, policy, update) are added to what it returns."""
    image = verbs.add_parser("image", help="an ImageRepository, ImagePolicy or ImageUpdateAutomation")
    return image.add_subparsers(dest="create_image", required=True, metavar="repository|policy|update")


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


REPOSITORY_FLAGS = (
    arg("--image", required=True, help="the image repository, without a tag (ghcr.io/org/app)"),
    arg("--secret-ref", metavar="NAME", help="a dockerconfigjson Secret with the registry's login"),
    arg("--cert-secret-ref", metavar="NAME", help="a Secret with ca.crt, the registry's CA"),
    arg("--insecure", action="store_true", help="plain HTTP to the registry"),
    arg("--timeout", help="how long a scan may take (a duration: 60s)"),
    arg("--exclusion", action="append", metavar="REGEX", help="tags left out (repeatable; default ^.*\\.sig$)"))
POLICY_FLAGS = (
    arg("--image-ref", required=True, metavar="NAME", help="the ImageRepository whose tags it chooses from"),
    arg("--select-semver", metavar="RANGE", help="the highest version in this range (1.x, ^1.2)"),
    arg("--select-alpha", choices=("asc", "desc"), help="the last tag in alphabetical order (desc: the first)"),
    arg("--select-numeric", choices=("asc", "desc"), help="the highest number (desc: the lowest)"),
    arg("--filter-regex", metavar="REGEX", help="only tags it matches"),
    arg("--filter-extract", metavar="TEMPLATE", help="what of them is ordered ($1, ${name})"),
    arg("--reflect-digest", choices=("Never", "IfNotPresent", "Always"), help="look up the chosen tag's digest"))
UPDATE_FLAGS = (
    arg("--git-repo-ref", required=True, metavar="NAME", help="the GitRepository to update"),
    arg("--author-email", required=True, help="the commits' author"),
    arg("--author-name", help="the commits' author's name"),
    arg("--checkout-branch", help="the branch updated (default: the GitRepository's ref)"),
    arg("--push-branch", help="the branch pushed to (default: the one checked out)"),
    arg("--commit-template", metavar="TEMPLATE", help="the commit message (a Go template)"),
    arg("--signing-key", metavar="SECRET", help="sign the commits with this Secret's key"),
    arg("--signing-type", choices=("gpg", "ssh"), default="gpg", help="the key's kind (default gpg)"),
    arg("--path", default="./", help="the folder whose markers are set (default the root)"))
