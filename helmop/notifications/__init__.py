"""Notifications leaving the cluster: the events of helmop's objects sent, as their Alerts select, to each
Provider's service (a chat, an on-call tool, a git host's commit statuses), in that service's own API.

Below the controllers, beside reconcile and helm: the controllers hand it Providers, Alerts and events; it never
calls back. ``addresses`` decides where a request may go, ``payloads`` what each service is sent (pure),
``outbox`` sends one provider's queue in order with retries, ``notifier`` ties them together.
"""
