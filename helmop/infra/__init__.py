"""The bottom I/O layer: the Kubernetes API client, Events, leader election, probes, metrics, the push
webhook's HTTP side, termination and the worker process. It knows HTTP and processes, not helm, charts
or any kind's reconcile."""
