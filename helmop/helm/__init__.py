"""Helm semantics and actions: values merging, release records, and the release engine (pyhelm3)."""
