"""The job and cronjob controllers: Jobs run Pods, CronJobs create Jobs on their schedule.

A Job creates Pods from its template (labelled and owned as upstream's controller does them), one
at a time up to ``parallelism``; the sandbox's kubelet finishes each (Succeeded, or Failed when the
Job is simulated to fail), and the Job counts them: Complete once ``completions`` succeeded,
Failed once more than ``backoffLimit`` failed (without upstream's backoff delay between retries).
A CronJob creates ``<name>-<minutes since epoch>`` Jobs at the times its schedule (cron syntax, via
croniter, in ``timeZone``) names, honouring ``suspend``, ``concurrencyPolicy`` and the history limits.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter

from .events import Recorder
from .store import Obj, clone

JOBS, PODS, CRONJOBS = ("batch", "jobs"), ("", "pods"), ("batch", "cronjobs")
JOB_NAME, CONTROLLER_UID = "batch.kubernetes.io/job-name", "batch.kubernetes.io/controller-uid"
SCHEDULED = "batch.kubernetes.io/cronjob-scheduled-timestamp"


def stamp(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def owner_ref(obj: Obj) -> dict[str, Any]:
    meta = obj["metadata"]
    return {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "name": meta["name"],
            "uid": meta["uid"], "controller": True, "blockOwnerDeletion": True}


def knobs(owner: Obj) -> dict[str, str]:
    """The owner's simulation knobs, which reach what it creates (a failing Job's Pods fail too)."""
    return {k: v for k, v in (owner["metadata"].get("annotations") or {}).items()
            if k.startswith("sandbox.helmop.dev/")}


def _finished(job: Obj) -> str | None:
    return next((c["type"] for c in (job.get("status") or {}).get("conditions") or []
                 if c.get("type") in ("Complete", "Failed") and c.get("status") == "True"), None)


class Batch:
    def __init__(self, controllers: Any, recorder: Recorder, clock: Callable[[], datetime]) -> None:
        self.c = controllers  # the Controllers: api, status writes, the simulation knobs
        self.api = controllers.api
        self.recorder = recorder
        self.clock = clock

    # --- jobs --------------------------------------------------------------------------------------

    def job(self, rt: Any, job: Obj) -> None:
        spec = job.get("spec") or {}
        if spec.get("suspend") or _finished(job):
            return
        pods = self.c.owned(job, PODS)
        phases = [(p.get("status") or {}).get("phase") for p in pods]
        succeeded, failed = phases.count("Succeeded"), phases.count("Failed")
        active = len(pods) - succeeded - failed
        completions, limit = int(spec.get("completions", 1)), int(spec.get("backoffLimit", 6))
        status: dict[str, Any] = {"startTime": (job.get("status") or {}).get("startTime", stamp(self.clock())),
                                  "active": active, "succeeded": succeeded, "failed": failed, "ready": 0}
        if succeeded >= completions:
            status["completionTime"] = stamp(self.clock())
            status["conditions"] = [self.c.condition("SuccessCriteriaMet", True, "CompletionsReached",
                                                     "Reached expected number of succeeded pods"),
                                    self.c.condition("Complete", True, "CompletionsReached",
                                                     "Reached expected number of succeeded pods")]
            status["active"] = 0
            self.c.write_status(rt, job, status)
            self.recorder.emit(job, "Completed", "Job completed", "job-controller")
            return
        if failed > limit:
            why = "Job has reached the specified backoff limit"
            status["conditions"] = [self.c.condition("FailureTarget", True, "BackoffLimitExceeded", why),
                                    self.c.condition("Failed", True, "BackoffLimitExceeded", why)]
            self.c.write_status(rt, job, status)
            self.recorder.emit(job, "BackoffLimitExceeded", why, "job-controller", "Warning")
            return
        wanted = min(int(spec.get("parallelism", 1)), completions - succeeded) - active
        for _ in range(max(0, wanted)):
            self._start_pod(job)
            status["active"] += 1
        self.c.write_status(rt, job, status)

    def _start_pod(self, job: Obj) -> None:
        meta = job["metadata"]
        template = clone((job.get("spec") or {}).get("template") or {})
        pod_meta = template.get("metadata") or {}
        labels = {**(pod_meta.get("labels") or {}), JOB_NAME: meta["name"], "job-name": meta["name"],
                  CONTROLLER_UID: meta["uid"], "controller-uid": meta["uid"]}
        name = f"{meta['name']}-{secrets.token_hex(3)[:5]}"
        pod = {"metadata": {"name": name, "labels": labels,
                            "annotations": {**(pod_meta.get("annotations") or {}), **knobs(job)},
                            "ownerReferences": [owner_ref(job)]},
               "spec": template.get("spec") or {}}
        self.api.create(self.api.type_of(PODS), meta["namespace"], pod, self.c.manager)
        self.recorder.emit(job, "SuccessfulCreate", f"Created pod: {name}", "job-controller")

    # --- cronjobs ----------------------------------------------------------------------------------

    def cronjobs(self) -> None:
        """One pass over every CronJob (the controller's resync)."""
        rt = self.api.type_of(CRONJOBS)
        for cronjob in list(self.api.store.items(CRONJOBS)):
            if not cronjob["metadata"].get("deletionTimestamp"):
                self.cronjob(rt, cronjob)

    def cronjob(self, rt: Any, cronjob: Obj) -> None:
        spec, meta = cronjob.get("spec") or {}, cronjob["metadata"]
        status = clone(cronjob.get("status") or {})
        jobs = self.c.owned(cronjob, JOBS)
        changed = self._saw_finished(cronjob, jobs, status)
        due = self._due(spec, meta, status)
        running = [j for j in jobs if not _finished(j)]
        if due is not None and not spec.get("suspend"):
            policy = spec.get("concurrencyPolicy", "Allow")
            if running and policy == "Forbid":
                due = None
            else:
                if running and policy == "Replace":
                    for job in running:
                        self.c.delete_dependent(JOBS, job)
                        self.recorder.emit(cronjob, "SuccessfulDelete", f"Deleted job {job['metadata']['name']}",
                                           "cronjob-controller")
                self._create_job(cronjob, due, status)
                changed = True
        self._trim_history(cronjob, jobs, spec)
        if changed:
            self.api.write_status(rt, cronjob, status)  # the whole status: an emptied `active` goes

    def _due(self, spec: Obj, meta: Obj, status: Obj) -> datetime | None:
        """The latest scheduled time not yet run, if any (missed ones are not all made up for)."""
        try:
            zone = ZoneInfo(spec.get("timeZone") or "UTC")
            since = parse(status.get("lastScheduleTime") or meta["creationTimestamp"]).astimezone(zone)
            times = croniter(str(spec.get("schedule", "")), since)
            due = None
            now = self.clock().astimezone(zone)
            while (candidate := times.get_next(datetime)) <= now:
                due = candidate
        except (ValueError, KeyError, ZoneInfoNotFoundError):
            return None  # validation keeps bad schedules out; a stored one is left alone
        return due

    def _create_job(self, cronjob: Obj, due: datetime, status: Obj) -> None:
        meta = cronjob["metadata"]
        template = clone((cronjob.get("spec") or {}).get("jobTemplate") or {})
        name = f"{meta['name']}-{int(due.timestamp()) // 60}"
        job = {"metadata": {"name": name, "labels": (template.get("metadata") or {}).get("labels") or {},
                            "annotations": {**((template.get("metadata") or {}).get("annotations") or {}),
                                            SCHEDULED: stamp(due), **knobs(cronjob)},
                            "ownerReferences": [owner_ref(cronjob)]},
               "spec": template.get("spec") or {}}
        created = self.api.create(self.api.type_of(JOBS), meta["namespace"], job, self.c.manager)
        status.setdefault("active", []).append({"kind": "Job", "namespace": meta["namespace"], "name": name,
                                                "uid": created["metadata"]["uid"], "apiVersion": "batch/v1",
                                                "resourceVersion": created["metadata"]["resourceVersion"]})
        status["lastScheduleTime"] = stamp(due)
        self.recorder.emit(cronjob, "SuccessfulCreate", f"Created job {name}", "cronjob-controller")

    def _saw_finished(self, cronjob: Obj, jobs: list[Obj], status: Obj) -> bool:
        finished = {j["metadata"]["uid"]: j for j in jobs if _finished(j)}
        active = status.get("active") or []
        done = [ref for ref in active if ref.get("uid") in finished]
        for ref in done:
            job = finished[ref["uid"]]
            outcome = _finished(job)
            self.recorder.emit(cronjob, "SawCompletedJob",
                               f"Saw completed job: {job['metadata']['name']}, condition: {outcome}",
                               "cronjob-controller")
            if outcome == "Complete":
                status["lastSuccessfulTime"] = (job.get("status") or {}).get("completionTime", stamp(self.clock()))
        status["active"] = [ref for ref in active if ref not in done]
        if not status["active"]:
            status.pop("active")
        return bool(done)

    def _trim_history(self, cronjob: Obj, jobs: list[Obj], spec: Obj) -> None:
        for outcome, limit in (("Complete", spec.get("successfulJobsHistoryLimit", 3)),
                               ("Failed", spec.get("failedJobsHistoryLimit", 1))):
            old = sorted((j for j in jobs if _finished(j) == outcome),
                         key=lambda j: j["metadata"].get("creationTimestamp", ""))
            for job in old[:max(0, len(old) - int(limit))]:
                self.c.delete_dependent(JOBS, job)
                self.recorder.emit(cronjob, "SuccessfulDelete", f"Deleted job {job['metadata']['name']}",
                                   "cronjob-controller")
