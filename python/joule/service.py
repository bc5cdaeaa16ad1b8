# SPDX-FileCopyrightText: 2026 the joule developers
# SPDX-License-Identifier: Apache-2.0
"""A client of `joule serve`, the batch-size service (HTTP/JSON).

    import joule
    client = joule.BatchSizeClient("http://127.0.0.1:8321")
    client.register_job("resnet50", [64, 128, 256], 128, max_power_w=300.0)
    a = client.ask("resnet50")                 # which batch size (and power limit) to use
    ... train with a.batch_size ...
    cost = client.report(a.recurrence_id, energy_j, time_s, reached_target=True)

Standard library only (http.client + json). One connection is kept alive
between requests, and a new one opened when the service closed it or it was
idle for over a second. A GET or PUT whose connection broke under it is sent
once more; a POST is not (the service may have carried it out) and raises
ServiceError. A client is not meant to be shared between threads: give each
thread its own.
"""
from __future__ import annotations

import dataclasses
import http.client
import json
import math
import os
import time
import urllib.parse
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

# As the C++ client (src/service/client.cc): a connection idle this long is
# not reused (joule serve closes idle ones after 4 s), and only requests that
# do the same when sent twice are sent again on a connection that broke.
_MAX_IDLE_REUSE_S = 1.0
_RESENDABLE = ("GET", "PUT")

DEFAULT_URL = "http://127.0.0.1:8321"

__all__ = ["Assignment", "BatchSizeClient", "ServiceError", "DEFAULT_URL"]


class ServiceError(Exception):
    """A request the service refused or did not answer.

    status is the HTTP status (400 bad input, 404 unknown job or recurrence,
    409 conflict, ...), or 0 when no answer came back. str() carries the
    service's own "error" message.
    """

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclasses.dataclass(frozen=True)
class Assignment:
    """What one recurrence (training run) of a job is told to do."""

    recurrence_id: int
    batch_size: int
    # The best power limit for this batch size on the job's GPU model, when
    # the service holds a power profile for it; None otherwise.
    power_limit_w: Optional[float]
    # Stop the run once its cost passes this; math.inf while there is none.
    early_stop_threshold_cost: float


@dataclasses.dataclass(frozen=True)
class ProgressAdvice:
    """The service's answer to a progress report."""

    cost: float  # of the run so far, by the job's objective
    threshold_cost: float  # the recurrence's early-stop threshold; math.inf while there is none
    stop: bool  # the cost has reached the threshold


def _segment(text: str) -> str:
    """One path segment, percent-encoded (GPU model names have spaces)."""
    return urllib.parse.quote(str(text), safe="")


class BatchSizeClient:
    """Talks to a `joule serve` at url (default: $JOULE_SERVICE_URL, else
    http://127.0.0.1:8321). timeout_s bounds connecting and each read.
    token is sent as "Authorization: Bearer TOKEN" (a service on another
    machine needs one: `joule tokens create`); default $JOULE_SERVICE_TOKEN,
    else none; "" sends none."""

    def __init__(self, url: Optional[str] = None, timeout_s: float = 10.0, token: Optional[str] = None) -> None:
        self.url = (url or os.environ.get("JOULE_SERVICE_URL") or DEFAULT_URL).rstrip("/")
        parsed = urllib.parse.urlsplit(self.url)
        if parsed.scheme != "http" or not parsed.hostname or parsed.path not in ("", "/"):
            raise ServiceError(0, f"'{self.url}' is not a service URL (http://HOST:PORT)")
        self._host = parsed.hostname
        try:
            self._port = parsed.port or 80
        except ValueError as e:
            raise ServiceError(0, f"'{self.url}' is not a service URL (http://HOST:PORT): {e}") from None
        self.timeout_s = timeout_s
        self._token = os.environ.get("JOULE_SERVICE_TOKEN", "") if token is None else token
        self._connection: Optional[http.client.HTTPConnection] = None
        self._answered_at: Optional[float] = None  # when the connection last answered (monotonic s)

    # -- plumbing ---------------------------------------------------------

    def close(self) -> None:
        """Closes the kept-alive connection (a later request opens another)."""
        if self._connection is not None:
            self._connection.close()
            self._connection = None
        self._answered_at = None

    def __enter__(self) -> "BatchSizeClient":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, method: str, path: str, body: Optional[bytes]) -> http.client.HTTPResponse:
        if self._answered_at is not None and time.monotonic() - self._answered_at > _MAX_IDLE_REUSE_S:
            self.close()  # the service may be closing it right now
        if self._connection is None:
            self._connection = http.client.HTTPConnection(self._host, self._port, timeout=self.timeout_s)
            self._answered_at = None
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        self._connection.request(method, path, body=body, headers=headers)
        return self._connection.getresponse()

    def _call(self, method: str, path: str, body: Optional[Mapping[str, Any]] = None) -> Tuple[int, Any]:
        """Sends one request; returns (status, JSON body or None) of a 2xx answer."""
        data = json.dumps(body).encode() if body is not None else None
        where = f"{method} {self.url}{path}"
        try:
            try:
                response = self._send(method, path, data)
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                if self._answered_at is None or method not in _RESENDABLE:
                    raise
                # The service closed a kept-alive connection under the
                # request: a GET or PUT once more on a fresh connection. Not
                # a POST: the service may have carried it out (a report
                # counted twice, a recurrence begun twice).
                self.close()
                response = self._send(method, path, data)
            status = response.status
            text = response.read()
            self._answered_at = time.monotonic()
            if response.will_close:
                self.close()
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise ServiceError(0, f"{where}: no answer ({e})") from None
        reply: Any = None
        if text:
            try:
                reply = json.loads(text)
            except ValueError:
                raise ServiceError(status, f"{where}: the answer is not JSON") from None
        if status >= 300:
            why = reply["error"] if isinstance(reply, dict) and "error" in reply else text.decode(errors="replace")
            raise ServiceError(status, f"{where}: {why} ({status})")
        return status, reply

    # -- the service's routes --------------------------------------------

    def register_job(
        self,
        name: str,
        batch_sizes: Sequence[int],
        default_batch_size: int,
        max_power_w: float,
        eta: float = 0.5,
        beta: float = 2.0,
        target_metric: str = "",
        max_epochs: int = 0,
        window: Optional[int] = None,
        gpu_model: str = "",
        gpu_count: int = 1,
        seed: int = 1,
    ) -> bool:
        """Registers a job. True: created; False: already there with the same
        spec. A different spec under the name is a ServiceError (409)."""
        spec: Dict[str, Any] = {
            "name": name,
            "batch_sizes": [int(b) for b in batch_sizes],
            "default_batch_size": int(default_batch_size),
            "eta": float(eta),
            "beta": float(beta),
            "target_metric": target_metric,
            "max_epochs": int(max_epochs),
            "gpu_model": gpu_model,
            "gpu_count": int(gpu_count),
            "max_power_w": float(max_power_w),
            "seed": int(seed),
        }
        if window is not None:
            spec["window"] = int(window)
        status, _ = self._call("POST", "/v1/jobs", spec)
        return status == 201

    def ask(self, job: str, node: Optional[str] = None, gpu_model: Optional[str] = None) -> Assignment:
        """Starts a recurrence of job: its batch size, power limit and
        early-stop threshold. node names the asker (default: its address);
        gpu_model is its GPU model, whose published profile gives the power
        limit (default: the job spec's gpu_model)."""
        body: Dict[str, Any] = {} if node is None else {"node": node}
        if gpu_model:
            body["gpu_model"] = gpu_model
        _, reply = self._call("POST", f"/v1/jobs/{_segment(job)}/recurrences", body)
        limit = reply.get("power_limit_w")
        threshold = reply.get("early_stop_threshold_cost")
        return Assignment(
            recurrence_id=int(reply["recurrence_id"]),
            batch_size=int(reply["batch_size"]),
            power_limit_w=None if limit is None else float(limit),
            early_stop_threshold_cost=math.inf if threshold is None else float(threshold),
        )

    def report(
        self,
        recurrence_id: int,
        energy_j: float,
        time_s: float,
        reached_target: bool,
        stopped_early: bool = False,
    ) -> float:
        """Reports how a recurrence went; returns the cost the service learned
        from (a run stopped early at its threshold costs the threshold).
        A recurrence reports once (again: ServiceError 409)."""
        body = {
            "energy_j": float(energy_j),
            "time_s": float(time_s),
            "reached_target": bool(reached_target),
            "stopped_early": bool(stopped_early),
        }
        _, reply = self._call("POST", f"/v1/recurrences/{int(recurrence_id)}/result", body)
        return float(reply["cost"])

    def progress(self, recurrence_id: int, epochs: int, energy_j: float, time_s: float) -> ProgressAdvice:
        """Reports a recurrence's progress (epochs done, energy and time so
        far): the service keeps the last report (client.export_job shows it)
        and says whether the run has reached its early-stop threshold. After
        the recurrence reported its result: ServiceError 409."""
        body = {"epochs": int(epochs), "energy_j": float(energy_j), "time_s": float(time_s)}
        _, reply = self._call("POST", f"/v1/recurrences/{int(recurrence_id)}/progress", body)
        threshold = reply["threshold_cost"]
        return ProgressAdvice(
            cost=float(reply["cost"]),
            threshold_cost=math.inf if threshold is None else float(threshold),
            stop=bool(reply["stop"]),
        )

    def put_power_profile(
        self, job: str, gpu_model: str, batch_size: int, entries: Sequence[Mapping[str, float]]
    ) -> None:
        """Stores a measured power profile for one batch size of job on a GPU
        model: entries of {"power_limit_w", "time_per_epoch_s", "avg_power_w"}.
        Later recurrences on that model are told its best limit."""
        path = f"/v1/jobs/{_segment(job)}/profiles/{_segment(gpu_model)}/{int(batch_size)}"
        self._call("PUT", path, {"entries": [dict(e) for e in entries]})

    def jobs(self) -> List[Dict[str, Any]]:
        """Every job, summarised (spec, phase, best_batch_size, revision,
        recurrences, in_flight)."""
        _, reply = self._call("GET", "/v1/jobs")
        return list(reply["jobs"])

    def job(self, name: str) -> Dict[str, Any]:
        """One job's summary (its spec under "spec")."""
        _, reply = self._call("GET", f"/v1/jobs/{_segment(name)}")
        return dict(reply)

    def export_job(self, name: str) -> Dict[str, Any]:
        """Spec, optimizer state and every recurrence of a job."""
        _, reply = self._call("GET", f"/v1/jobs/{_segment(name)}/export")
        return dict(reply)

    def health(self) -> Dict[str, Any]:
        """The service's liveness: status, store and joule_version."""
        _, reply = self._call("GET", "/healthz")
        return dict(reply)
