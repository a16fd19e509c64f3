"""Experiments: one task over a matrix of agents, models, inputs and attempts.

spec.py      the definition (experiment.yaml / the API's JSON) and the cells it expands to
check.py     refusing a matrix before any run starts, naming the field
stats.py     pass@k, pass^k, Wilson and Newcombe intervals
results.py   the figures, computed from the runs' records
service.py   create, read, cancel, resume, and the scheduling pass
scheduler.py the poller that runs the passes inside a server
export.py    one row per run (CSV, JSONL) and ATIF trajectories
"""

from pier.experiments.spec import ExperimentError, ExperimentSpec

__all__ = ["ExperimentError", "ExperimentSpec"]
