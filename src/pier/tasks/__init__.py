from pier.tasks.build import infer_agent, task_from_runbook
from pier.tasks.model import StepConfig, Task
from pier.tasks.resolve import ResolvedStep, lookup, merge_init_params, resolve, step_override

__all__ = [
    "ResolvedStep",
    "StepConfig",
    "Task",
    "infer_agent",
    "lookup",
    "merge_init_params",
    "resolve",
    "step_override",
    "task_from_runbook",
]
