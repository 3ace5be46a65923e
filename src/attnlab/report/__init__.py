"""The reproduction report: run the named experiments through the runner and write a static ``index.html``.

Importing this package also registers attnlab's sweep tasks (:mod:`attnlab.tasks`).
"""

from attnlab.report.html import ExperimentEntry, ReportSummary, build_report
from attnlab.report.reproduce import paper_counts, reproduce
from attnlab.tasks import ExperimentTask

__all__ = ["ExperimentEntry", "ExperimentTask", "ReportSummary", "build_report", "paper_counts", "reproduce"]
