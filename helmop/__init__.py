"""helmop: a Helm release operator for Kubernetes, built on kopf."""
