"""MLflow conventions: experiment per track, run named after the stage, flat params, steps."""

import pytest

from contrastlab.tracking import experiment_name, stage_run


@pytest.fixture
def mlflow_store(tmp_path, monkeypatch):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("CONTRASTLAB_MLFLOW", "1")
    monkeypatch.delenv("RANK", raising=False)
    return uri


@pytest.mark.slow
def test_stage_run_logs_run_params_and_stepped_metrics(mlflow_store):
    import mlflow
    from mlflow.tracking import MlflowClient

    with stage_run("graph", "train_graph@ntxent", {"graph": {"temperature": 0.5, "lr": 1e-3}}) as t:
        for epoch in range(3):
            t.log_metrics({"loss": 1.0 / (epoch + 1), "bad": float("nan")}, step=epoch)
        run_id = t.run_id
    client = MlflowClient(mlflow_store)
    run = client.get_run(run_id)
    assert run.info.run_name == "train_graph@ntxent"
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == experiment_name("graph")
    assert run.data.params == {"graph.temperature": "0.5", "graph.lr": "0.001"}
    assert run.data.tags["dvc_stage"] == "train_graph@ntxent"
    assert "git_commit" in run.data.tags and "params_hash" in run.data.tags
    hist = client.get_metric_history(run_id, "loss")
    assert [m.step for m in hist] == [0, 1, 2]
    assert "bad" not in run.data.metrics  # NaN is not logged
    mlflow.set_tracking_uri(mlflow_store)


@pytest.mark.slow
def test_failed_stage_marks_run_failed(mlflow_store):
    from mlflow.tracking import MlflowClient

    with pytest.raises(ValueError):
        with stage_run("code", "train_code@infonce", None) as t:
            run_id = t.run_id
            raise ValueError("NaN loss")
    assert MlflowClient(mlflow_store).get_run(run_id).info.status == "FAILED"


def test_disabled_and_non_zero_ranks_do_not_log(monkeypatch):
    monkeypatch.setenv("CONTRASTLAB_MLFLOW", "1")
    monkeypatch.setenv("RANK", "1")
    with stage_run("graph", "x", {"a": 1}) as t:
        assert not t.active
        t.log_metrics({"a": 1.0}, step=0)  # no-op, no error
