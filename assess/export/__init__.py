"""Exports of the index to where users already look: MLflow and W&B runs (`selection`, `mlflow`, `wandb`), and a
sweep's live progress in the Prometheus text format (`openmetrics`). docs/trackers.md says what each field means."""
