"""`assess export mlflow`: the tracked runs (assess.export.selection) into an MLflow experiment, idempotently.

A run is found again by its `hypergrid.key` tag: a second export updates it (new parameters, metrics whose
value changed, artefacts whose content changed) and never creates a second one. Metrics are logged at step 0
with the timestamp of the data they come from, so re-logging an unchanged value adds nothing. The server is
asked once before anything is written; a client that is missing or a server that does not answer is a
`TrackerUnavailable` (exit 2).
"""

from __future__ import annotations

import io
from contextlib import redirect_stdout
from typing import Any

from assess.export.env import environ
from assess.export.errors import TrackerUnavailable
from assess.export.selection import KEY_TAG, Exported, TrackedRun

ARTEFACTS_TAG = "hypergrid.artefacts"  # the digest of the artefacts last uploaded
PARENT_TAG = "mlflow.parentRunId"  # MLflow's own nesting tag (the UI draws children under their parent)
PROBE_TIMEOUT_S = "10"
RETRIES = "2"  # per request, once the server answered the probe


def _client_module() -> Any:
    try:
        import mlflow  # noqa: F401
        from mlflow.tracking import MlflowClient
    except ImportError as exc:
        raise TrackerUnavailable(f"MLflow is not installed ({exc}): pip install 'hypergrid[mlflow]'") from None
    return MlflowClient


def connect(tracking_uri: str) -> Any:
    """An MlflowClient on a tracking URI that answers; TrackerUnavailable otherwise (nothing written)."""
    client_class = _client_module()
    # MLflow's HTTP client retries an unreachable server for minutes by default: ask once, briefly
    with environ(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0", MLFLOW_HTTP_REQUEST_TIMEOUT=PROBE_TIMEOUT_S):
        try:
            client = client_class(tracking_uri=tracking_uri)
            client.search_experiments(max_results=1)
        except Exception as exc:  # the client raises MlflowException, requests' and urllib3's errors alike
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TrackerUnavailable(
                f"MLflow tracking server {tracking_uri} does not answer ({first[:300]}); nothing was exported. "
                "Start it (mlflow server --host 127.0.0.1 --port 5000) or pass --tracking-uri / set "
                "MLFLOW_TRACKING_URI") from None
    return client


def _existing(client: Any, experiment_id: str) -> dict[str, Any]:
    """hypergrid.key -> the MLflow run that carries it."""
    found: dict[str, Any] = {}
    token = None
    while True:
        page = client.search_runs([experiment_id], filter_string=f"tags.`{KEY_TAG}` LIKE '%'", max_results=1000,
                                  page_token=token)
        for run in page:
            found.setdefault(run.data.tags[KEY_TAG], run)
        token = page.token
        if not token:
            return found


def _experiment_id(client: Any, name: str) -> str:
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        return client.create_experiment(name)
    if experiment.lifecycle_stage == "deleted":
        client.restore_experiment(experiment.experiment_id)
    return experiment.experiment_id


def _upload(client: Any, run_id: str, tracked: TrackedRun) -> None:
    for local, folder in tracked.artefacts:
        if local.is_dir():
            client.log_artifacts(run_id, str(local), folder)
        else:
            client.log_artifact(run_id, str(local), folder)


def _write(client: Any, experiment_id: str, tracked: TrackedRun, existing: Any, parent_id: str | None
           ) -> tuple[str, str]:
    """Create or update one run; returns (created | updated | unchanged, its run id)."""
    from mlflow.entities import Metric, Param, RunTag

    tags = {**tracked.tags, KEY_TAG: tracked.key, **({PARENT_TAG: parent_id} if parent_id else {})}
    artefacts = tracked.digest if tracked.artefacts else ""
    if existing is None:
        run = client.create_run(experiment_id, start_time=tracked.timestamp_ms or None, tags=tags,
                                run_name=tracked.name)
        run_id, params, metrics, old_tags = run.info.run_id, {}, {}, {}
    else:
        run_id = existing.info.run_id
        params, metrics, old_tags = existing.data.params, existing.data.metrics, existing.data.tags
    new_params = [Param(k, v) for k, v in tracked.params.items() if k not in params]  # a parameter cannot change
    new_metrics = [Metric(k, v, tracked.timestamp_ms, 0) for k, v in tracked.metrics.items() if metrics.get(k) != v]
    new_tags = [RunTag(k, v) for k, v in tags.items() if old_tags.get(k) != v]
    upload = old_tags.get(ARTEFACTS_TAG) != artefacts
    unfinished = existing is not None and existing.info.status != "FINISHED"  # an export killed while writing it
    if existing is not None and not (new_params or new_metrics or new_tags or upload or unfinished):
        return "unchanged", run_id
    for start in range(0, max(len(new_params), len(new_metrics), len(new_tags)), 100):  # the server's batch limit
        client.log_batch(run_id, metrics=new_metrics[start:start + 100], params=new_params[start:start + 100],
                         tags=new_tags[start:start + 100])
    if upload:
        _upload(client, run_id, tracked)
        client.set_tag(run_id, ARTEFACTS_TAG, artefacts)
    if existing is None or unfinished:  # finished last: a run left RUNNING by a kill is finished by the next export
        with redirect_stdout(io.StringIO()):  # set_terminated prints the run's URL on stdout: ours is the summary
            client.set_terminated(run_id, "FINISHED")
    return ("created" if existing is None else "updated"), run_id


def export_mlflow(runs: list[TrackedRun], tracking_uri: str, experiment: str) -> Exported:
    """Send the tracked runs (parents before their children) to the MLflow experiment named `experiment`."""
    client = connect(tracking_uri)
    done = Exported()
    # a server that goes away mid-export: each request retried RETRIES times within about a minute, then one line
    with environ(MLFLOW_HTTP_REQUEST_MAX_RETRIES=RETRIES, MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR="1",
                 MLFLOW_HTTP_REQUEST_TIMEOUT=PROBE_TIMEOUT_S):
        try:
            experiment_id = _experiment_id(client, experiment)
            existing = _existing(client, experiment_id)
            ids = {key: run.info.run_id for key, run in existing.items()}
            for tracked in runs:
                outcome, ids[tracked.key] = _write(client, experiment_id, tracked, existing.get(tracked.key),
                                                   ids.get(tracked.parent) if tracked.parent else None)
                setattr(done, outcome, getattr(done, outcome) + 1)
        except Exception as exc:  # the client raises MlflowException, requests' and urllib3's errors alike
            first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else type(exc).__name__
            sent = done.created + done.updated + done.unchanged
            raise TrackerUnavailable(
                f"MLflow tracking server {tracking_uri} stopped answering ({first}) after {sent} of {len(runs)} "
                "run(s) were exported; run the same `assess export mlflow` again when it answers: it resumes, "
                "and finishes any run left unfinished") from None
    return done

