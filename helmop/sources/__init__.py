"""Chart sources: Helm repositories (HTTP and OCI) and, later, git; caches keyed by immutable
revisions, so an exact chart version is fetched once."""
