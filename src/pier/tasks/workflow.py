"""A workflow: `steps` run in order, each an activity from the catalogue with
its parameters (docs/workflows.md). This module is the catalogue (each
activity's parameters as a pydantic model), the static check of a workflow
(steps, activities, parameters and paths, before anything runs) and the
resolution of one step's parameters against what earlier steps produced.

A parameter `x` is given literally (`"temperature": 0.7`) or read by path
(`"temperature_path": "init_params.temperature"`), never both. A `*_path`
value may also be a list of paths (each read), as the platform's judge
templates write `items_path: ["a.outputs.text", "b.outputs.text"]`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from pier.errors import TaskError
from pier.tasks.paths import PathError, lookup_path, parse_path

PATH_SUFFIX = "_path"


class Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TextEcho(Params):
    text: Any = Field(description="the value to pass through (outputs.text)")


class TextTemplate(Params):
    template: str = Field(description="text with {{name}} placeholders")
    variables: dict[str, Any] = Field(
        default_factory=dict, description="name -> value; `variables_path` reads the whole object"
    )
    # the platform's spelling: each `<name>_path` not a parameter of its own fills {{name}}


class TextConcatenate(Params):
    texts: list[Any] = Field(description="the pieces, joined in order")
    separator: str = Field("\n\n", description="put between the pieces")


class TextSplit(Params):
    text: str = Field(description="the text to split")
    chunk_size: int = Field(1000, ge=1, description="characters per chunk")
    overlap: int = Field(0, ge=0, description="characters each chunk repeats of the one before")

    @model_validator(mode="after")
    def _overlap_below_size(self) -> TextSplit:
        if self.overlap >= self.chunk_size:
            raise ValueError(f"overlap ({self.overlap}) must be smaller than chunk_size ({self.chunk_size})")
        return self


Operator = Literal["truthy", "equals", "not_equals", "contains", "greater_than", "less_than"]


class ConditionalBranch(Params):
    condition: Any = Field(description="the value tested (usually `condition_path`)")
    operator: Operator = Field("truthy", description="how it is tested against `value`")
    value: Any = Field(None, description="what `condition` is compared with (not for truthy)")
    true_step: str | None = Field(None, description="the step to go on at when the test holds")
    false_step: str | None = Field(None, description="the step to go on at when it does not")


class ListEmitAwait(Params):
    items: list[Any] = Field(description="one child run per item (usually `items_path`)")
    child_workflow_name: str = Field(description="the child task, in the same collection")
    item_param_name: str = Field("item", description="the child's init_params key that gets its item")
    child_init_params: dict[str, Any] = Field(default_factory=dict, description="given to every child")
    max_concurrency: int = Field(10, ge=1, le=100, description="children running at once")
    continue_on_error: bool = Field(False, description="a failed child does not fail this step")


class ExtractFromTrajectories(Params):
    trajectory_list: list[Any] = Field(
        description="the children (usually `trajectory_list_path`: <fan-out>.outputs.trajectory_references)"
    )
    extract_keys: dict[str, str] = Field(description="output key -> path in each child (`step.outputs.key`)")
    flatten_results: bool = Field(False, description="a list value of a child is spread into the result")


class ScoreRange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    min: float = 1
    max: float = 5


class LitellmChat(Params):
    model: str = Field(description="the model, e.g. gpt-4o-mini or anthropic/claude-sonnet-4-5")
    model_provider: str | None = Field(
        None, description="openai, anthropic, openrouter (default: from the model)"
    )
    prompt: Any = Field(description="the user message (a non-string is sent as JSON)")
    system_prompt: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    response_format: dict[str, Any] | None = Field(None, description="OpenAI's response_format (json_schema)")


class LitellmVision(Params):
    model: str = Field(description="a vision model, e.g. gpt-4o or claude-sonnet-4-5")
    model_provider: str | None = Field(
        None, description="openai, anthropic, openrouter (default: from the model)"
    )
    prompt: Any = Field(description="what to ask about the image")
    system_prompt: str | None = None
    image_path_expr: Any = Field(
        None,
        description="a path whose value is a stored file of the run's collection (generate.outputs.images[0].path), or that file's path",
    )
    image_url: str | None = Field(
        None, description="an image's http(s) URL, given to the provider as is (image_url_path reads it)"
    )
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)

    @model_validator(mode="after")
    def _an_image(self) -> LitellmVision:
        if (self.image_path_expr is None) == (self.image_url is None):
            raise ValueError(
                "give one image: image_path_expr (a stored file) or image_url / image_url_path (a URL)"
            )
        return self


class ReplicateText2Image(Params):
    model: str = Field(description="owner/name or owner/name:version, e.g. black-forest-labs/flux-schnell")
    prompt: str = Field(description="the image's description")
    width: int | None = Field(None, ge=1, le=8192)
    height: int | None = Field(None, ge=1, le=8192)
    num_outputs: int | None = Field(None, ge=1, le=16)
    aspect_ratio: str | None = None
    input: dict[str, Any] = Field(default_factory=dict, description="the model's other inputs")


class ReplicateText2Video(Params):
    model: str = Field(description="owner/name or owner/name:version of a text-to-video model")
    prompt: str = Field(description="the video's description")
    input: dict[str, Any] = Field(default_factory=dict, description="the model's other inputs")


class ReplicateRun(Params):
    model: str = Field(description="owner/name or owner/name:version")
    input: dict[str, Any] = Field(
        description="the model's inputs; a key `<name>_path` in it reads <name> by path"
    )


class GeminiImageGenerator(Params):
    model: str = Field("gemini-2.5-flash-image", description="a Gemini model that answers with images")
    prompt: str = Field(description="the image's description")


class LitellmImageGeneration(Params):
    model: str = Field("dall-e-3", description="an OpenAI image model (dall-e-3, gpt-image-1)")
    prompt: str = Field(description="the image's description")
    size: str | None = Field(None, description="e.g. 1024x1024")
    quality: str | None = Field(None, description="standard or hd (dall-e-3)")
    n: int | None = Field(None, ge=1, le=10)


class SimpleJudge(Params):
    model: str = Field(description="the judge model")
    model_provider: str | None = None
    item: Any = Field(None, description="one item to judge")
    items: list[Any] | None = Field(None, description="several items, judged together (compared)")
    instruction: str = Field(description="what to judge them on")
    judge_type: Literal["scale", "categorical"] | None = Field(
        None, description="default: categorical when `categories` is given"
    )
    score_range: ScoreRange | None = Field(None, description="{min, max} of a scale score")
    categories: list[str] | None = None
    explanation_required: bool = Field(False, description="ask for an explanation (alias: with_explanation)")
    with_explanation: bool | None = None
    temperature: float | None = Field(None, ge=0, le=2)

    @model_validator(mode="after")
    def _something_to_judge(self) -> SimpleJudge:
        if self.item is None and not self.items:
            raise ValueError("give item/item_path or items/items_path: the judge needs something to judge")
        if self.judge_type == "categorical" and not self.categories and self.score_range is None:
            raise ValueError("a categorical judge needs categories")
        return self


@dataclass(frozen=True)
class Activity:
    name: str
    category: str
    description: str
    params: type[Params] | None  # None: the runbook step (pier.tasks.model.StepConfig)
    # Parameters whose literal value is itself a path (the platform's judge
    # template writes `items: ["a.outputs.text", ...]`): strings in it that parse
    # as a path of init_params or an earlier step are read.
    path_lists: tuple[str, ...] = ()
    # Parameters whose literal string is a path that is read (litellm_vision's
    # image_path_expr); a string that is no path of this workflow is the value.
    path_params: tuple[str, ...] = ()
    example: dict[str, Any] | None = None


ACTIVITIES: dict[str, Activity] = {
    a.name: a
    for a in (
        Activity("runbook", "agents", "runs an AI agent on a RUNBOOK.md in an isolated sandbox; results in /app/results", None),
        Activity("litellm_chat", "ai_models", "one chat completion through pier's model gateway: outputs.text, usage", LitellmChat),
        Activity("litellm_vision", "ai_models", "an image and a prompt to a vision model through pier's model gateway: outputs.text, usage", LitellmVision, path_params=("image_path_expr",)),
        Activity("litellm_image_generation", "ai_models", "OpenAI image generation through pier's model gateway: outputs.images (the run's files)", LitellmImageGeneration),
        Activity("gemini_image_generator", "ai_models", "Gemini image generation through pier's model gateway: outputs.images (the run's files)", GeminiImageGenerator),
        Activity("replicate_text2image", "ai_models", "text-to-image on Replicate through pier's model gateway: outputs.images (the run's files)", ReplicateText2Image),
        Activity("replicate_text2video", "ai_models", "text-to-video on Replicate through pier's model gateway: outputs.videos (the run's files)", ReplicateText2Video),
        Activity("replicate_run", "ai_models", "any Replicate model through pier's model gateway: outputs.output, and its files as outputs.files", ReplicateRun),
        Activity("simple_judge", "evaluation", "LLM-as-judge over an item or items: a score in a range or a category, with an explanation", SimpleJudge, path_lists=("items",)),
        Activity("text_echo", "data_processing", "passes a value through as outputs.text", TextEcho),
        Activity("text_template", "data_processing", "fills {{name}} placeholders of a template: outputs.text", TextTemplate),
        Activity("text_concatenate", "data_processing", "joins texts with a separator: outputs.text", TextConcatenate),
        Activity("text_split", "data_processing", "splits a text into chunks of chunk_size with overlap: outputs.chunks", TextSplit),
        Activity("conditional_branch", "control_flow", "tests a value and goes on at true_step or false_step, skipping the other", ConditionalBranch),
        Activity("list_emit_await", "control_flow", "fans a child task out over a list (max_concurrency at once) and waits for every child: outputs.trajectory_references", ListEmitAwait),
        Activity("extract_from_trajectories", "control_flow", "gathers values by path from the children of a fan-out: outputs.extracted_data", ExtractFromTrajectories),
    )
}  # fmt: skip
CATEGORIES = tuple(dict.fromkeys(a.category for a in ACTIVITIES.values()))
LLM_ACTIVITIES = frozenset({"litellm_chat", "simple_judge", "litellm_vision"})
# Model steps whose provider is fixed by the activity (their key is checked when a run is accepted).
MEDIA_PROVIDERS = {
    "litellm_image_generation": "openai", "gemini_image_generator": "google",
    "replicate_text2image": "replicate", "replicate_text2video": "replicate", "replicate_run": "replicate",
}  # fmt: skip


def known_activities() -> str:
    return ", ".join(ACTIVITIES)


def config_keys(params: type[Params]) -> dict[str, str]:
    """Every key a step config of this activity may hold -> the parameter it sets."""
    keys = {}
    for name in params.model_fields:
        keys[name] = name
        keys[name + PATH_SUFFIX] = name
    return keys


def config_schema(activity: Activity) -> dict[str, Any]:
    """The JSON schema of a step config of this activity: each parameter, and
    its `*_path` twin that reads it by path."""
    if activity.params is None:
        from pier.tasks.model import StepConfig

        return StepConfig.model_json_schema()
    schema = activity.params.model_json_schema()
    props = dict(schema.get("properties", {}))
    for name in activity.params.model_fields:
        props[name + PATH_SUFFIX] = {
            "anyOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}],
            "description": f"reads {name} by path (init_params.<key> or <step>.outputs.<key>)",
        }
    props = {"activity": {"const": activity.name}, **props}
    required = ["activity"] + [
        f"{n} | {n}{PATH_SUFFIX}" for n in schema.get("required", [])
    ]  # documentation: one of the two
    return {**schema, "properties": props, "required": ["activity"], "x-pier-one-of": required[1:]}


@dataclass(frozen=True)
class StepProblem:
    field: str  # step_configs.<step>.<key>, or steps
    message: str


def check_workflow(steps: Sequence[str], configs: Mapping[str, Mapping[str, Any]]) -> list[StepProblem]:
    """Every problem of a workflow found before it runs: steps without a config,
    unknown activities, unknown or missing parameters, malformed paths and
    paths to a step that does not come earlier."""
    problems: list[StepProblem] = []
    if not steps:
        return [StepProblem("steps", "a workflow needs at least one step")]
    if len(set(steps)) != len(steps):
        dup = sorted({s for s in steps if list(steps).count(s) > 1})
        problems.append(StepProblem("steps", f"steps {dup} appear more than once: give each step once"))
    for index, step in enumerate(steps):
        field = f"step_configs.{step}"
        if step == "init_params":
            problems.append(StepProblem("steps", "a step may not be named init_params (paths read it)"))
        config = configs.get(step)
        if not isinstance(config, Mapping):
            problems.append(StepProblem("steps", f"step {step!r} is in steps but has no step_configs entry"))
            continue
        activity = ACTIVITIES.get(config.get("activity", "runbook"))
        if activity is None:
            problems.append(
                StepProblem(
                    f"{field}.activity",
                    f"activity {config.get('activity')!r} is not one pier runs (pier has: {known_activities()})",
                )
            )
            continue
        if activity.params is None:
            problems.append(
                StepProblem(
                    f"{field}.activity",
                    "a runbook step must be a task's only step, named run; to run a runbook inside a "
                    "workflow, make it a task of its own and fan it out with list_emit_await",
                )
            )
            continue
        problems += _check_step(step, config, activity, set(steps[:index]), set(steps))
    return problems


def _check_step(
    step: str, config: Mapping[str, Any], activity: Activity, earlier: set[str], every: set[str]
) -> list[StepProblem]:
    assert activity.params is not None
    problems: list[StepProblem] = []
    field = f"step_configs.{step}"
    keys = config_keys(activity.params)
    given: dict[str, str] = {}
    for key, value in config.items():
        if key == "activity":
            continue
        param = keys.get(key)
        if param is None and activity.name == "text_template" and key.endswith(PATH_SUFFIX):
            problem = _path_problem(value, earlier)  # fills {{<name>}}
            if problem:
                problems.append(StepProblem(f"{field}.{key}", problem))
            continue
        if param is None:
            known = ", ".join(activity.params.model_fields)
            problems.append(
                StepProblem(
                    f"{field}.{key}",
                    f"{activity.name} has no parameter {key!r} (it has: {known}, each also as <name>_path)",
                )
            )
            continue
        if param in given:
            problems.append(
                StepProblem(
                    f"{field}.{key}", f"{given[param]} and {key} both set {param}: give only one of them"
                )
            )
            continue
        given[param] = key
        if key.endswith(PATH_SUFFIX) and key != param:
            for text in value if isinstance(value, list) else [value]:
                problem = _path_problem(text, earlier)
                if problem:
                    problems.append(StepProblem(f"{field}.{key}", problem))
    # required parameters, and literal values' types: validate with each path standing in as unknown
    literal = {p: config[k] for p, k in given.items() if k == p}
    missing = [n for n, f in activity.params.model_fields.items() if f.is_required() and n not in given]
    for name in missing:
        problems.append(
            StepProblem(f"{field}.{name}", f"{activity.name} needs {name} (or {name}{PATH_SUFFIX})")
        )
    if not missing and not any(k != p for p, k in given.items()):
        try:
            activity.params.model_validate(literal)
        except ValidationError as exc:
            problems += [_problem(field, e) for e in exc.errors()]
    if activity.name == "conditional_branch":
        for key in ("true_step", "false_step"):
            target = config.get(key)
            if isinstance(target, str) and (target not in every or target in earlier or target == step):
                problems.append(
                    StepProblem(f"{field}.{key}", f"{key} {target!r} is not a step after {step!r} in steps")
                )
    nested = config.get("input")
    if "input" in activity.params.model_fields and isinstance(nested, Mapping):
        for key, value in nested.items():
            if isinstance(key, str) and key.endswith(PATH_SUFFIX):
                for text in value if isinstance(value, list) else [value]:
                    problem = _path_problem(text, earlier)
                    if problem:
                        problems.append(StepProblem(f"{field}.input.{key}", problem))
    for name in activity.path_params:
        text = config.get(name)
        try:
            path = parse_path(text) if isinstance(text, str) else None
        except PathError:
            path = None
        if path is not None and path.root in every and path.root not in earlier:
            problems.append(
                StepProblem(
                    f"{field}.{name}",
                    f"path {text!r} reads step {path.root!r}, which is not a step before this one in steps",
                )
            )
    if activity.name == "extract_from_trajectories":
        for name, text in (
            (config.get("extract_keys") or {}).items()
            if isinstance(config.get("extract_keys"), Mapping)
            else []
        ):
            try:
                parse_path(text)
            except PathError as exc:
                problems.append(StepProblem(f"{field}.extract_keys.{name}", str(exc)))
    return problems


def _path_problem(text: Any, earlier: set[str]) -> str | None:
    try:
        path = parse_path(text)
    except PathError as exc:
        return str(exc)
    if path.root != "init_params" and path.root not in earlier:
        return f"path {path.text!r} reads step {path.root!r}, which is not a step before this one in steps"
    return None


def _problem(field: str, error: Mapping[str, Any]) -> StepProblem:
    loc = ".".join(str(p) for p in error.get("loc", ()))
    return StepProblem(f"{field}.{loc}" if loc else field, str(error.get("msg", "invalid")))


class WorkflowProblems(TaskError):
    """A workflow's problems, each naming its field (the API answers one
    422 entry per problem, not one for the whole body)."""

    def __init__(self, problems: list[StepProblem]) -> None:
        super().__init__("; ".join(f"{p.field}: {p.message}" for p in problems))
        self.problems = problems


def raise_problems(problems: list[StepProblem]) -> None:
    if problems:
        raise WorkflowProblems(problems)


# resolving one step's parameters at run time


def resolve_params(
    step: str, config: Mapping[str, Any], context: Mapping[str, Any]
) -> tuple[dict[str, Any], Params]:
    """(the step's inputs as recorded, its checked parameters). Paths are read
    from context; a missing one raises TaskError naming the step and the path."""
    activity = ACTIVITIES[config.get("activity", "runbook")]
    assert activity.params is not None
    keys = config_keys(activity.params)
    inputs: dict[str, Any] = {}
    for key, value in config.items():
        if key == "activity":
            continue
        param = keys.get(key)
        if param is None:  # text_template's <name>_path: fills {{name}}
            variables = inputs.setdefault("variables", {})
            variables[key.removesuffix(PATH_SUFFIX)] = _read(step, key, value, context)
            continue
        if key != param:
            inputs[param] = _read(step, key, value, context)
        elif param in activity.path_lists and isinstance(value, list):
            inputs[param] = [_maybe_path(item, context) for item in value]
        elif param in activity.path_params:
            inputs[param] = _maybe_path(value, context)
        elif param == "input" and isinstance(value, Mapping):  # replicate's: `<name>_path` keys read by path
            inputs[param] = {
                (k.removesuffix(PATH_SUFFIX) if k.endswith(PATH_SUFFIX) else k):
                    (_read(step, f"input.{k}", v, context) if k.endswith(PATH_SUFFIX) else v)
                for k, v in value.items()
            }  # fmt: skip
        elif param == "variables" and isinstance(value, Mapping):
            inputs[param] = {**dict(value), **inputs.get(param, {})}
        else:
            inputs[param] = value
    try:
        return inputs, activity.params.model_validate(inputs)
    except ValidationError as exc:
        detail = "; ".join(
            f"{p.field}: {p.message}" for p in (_problem(f"step {step!r}", e) for e in exc.errors())
        )
        raise TaskError(
            f"step {step!r} ({activity.name}): its parameters do not validate: {detail}"
        ) from None


def _read(step: str, key: str, value: Any, context: Mapping[str, Any]) -> Any:
    texts = value if isinstance(value, list) else [value]
    found = []
    for text in texts:
        try:
            found.append(lookup_path(text, context))
        except PathError as exc:
            raise TaskError(f"step {step!r}: {key}: {exc}") from None
    return found if isinstance(value, list) else found[0]


def _maybe_path(item: Any, context: Mapping[str, Any]) -> Any:
    if not isinstance(item, str):
        return item
    try:
        path = parse_path(item)
    except PathError:
        return item
    if path.root != "init_params" and path.root not in context:
        return item  # plain text that happens to look like a path
    try:
        return lookup_path(item, context)
    except PathError as exc:  # it names a step that ran: a missing key is an error, not text
        raise TaskError(f"{exc}") from None
