"""The reproduction report: run the named experiments through the runner and write a static ``index.html``.

Importing this package also registers the ``experiment`` sweep task.
"""

from attnlab.report.experiment_task import ExperimentTask
from attnlab.report.html import ExperimentEntry, ReportSummary, build_report
from attnlab.report.reproduce import paper_counts, reproduce
from attnlab.runner import register_task

register_task(ExperimentTask())

__all__ = ["ExperimentEntry", "ExperimentTask", "ReportSummary", "build_report", "paper_counts", "reproduce"]
