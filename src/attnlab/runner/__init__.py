"""Executors, results store, resume and progress: the machinery that runs experiments, knowing nothing of papers."""

from attnlab.runner.store import atomic_write, config_hash, save_figure, write_csv, write_json, write_parquet

__all__ = ["atomic_write", "config_hash", "save_figure", "write_csv", "write_json", "write_parquet"]
