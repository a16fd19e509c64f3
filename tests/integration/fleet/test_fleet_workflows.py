"""A workflow on the fleet: accepted by a `pier serve` with PIER_EXECUTOR=temporal,
a Temporal workflow of its own whose steps are activities any `pier worker`
takes, its fan-out's children ordinary runs of the collection, each a child
workflow."""

from __future__ import annotations

import json
import signal
import threading
import time
from collections import Counter

import pytest
from tests.support.api_server import make_collection
from tests.support.fleet import FAKE_BACKEND, Fleet, ran_on, wait_for
from tests.support.model_server import ModelServer, Recorded

pytestmark = pytest.mark.integration

CHILD = {
    "init_params": {"item": ""},
    "step_configs": {
        "say": {"activity": "text_template", "template": "hello {{who}}", "who_path": "init_params.item"}
    },
    "steps": ["say"],
}
PARENT = {
    "init_params": {"text": "ada,bo,cy,di"},
    "step_configs": {
        "split": {"activity": "text_split", "text_path": "init_params.text", "chunk_size": 2, "overlap": 0},
        "names": {"activity": "text_echo", "text_path": "split.outputs.chunks[*]"},
        "fan": {"activity": "list_emit_await", "items": ["ada", "bo", "cy"], "child_workflow_name": "say",
                "max_concurrency": 2},
        "gather": {"activity": "extract_from_trajectories", "trajectory_list_path": "fan.outputs.trajectory_references",
                   "extract_keys": {"said": "say.outputs.text"}},
        "all": {"activity": "text_concatenate", "texts_path": "gather.outputs.said", "separator": "; "},
    },
    "steps": ["split", "names", "fan", "gather", "all"],
}  # fmt: skip


def test_a_workflow_with_a_fan_out_runs_on_a_worker(fleet: Fleet) -> None:
    fleet.settings.update({"PIER_SANDBOX_BACKEND": FAKE_BACKEND})
    server = fleet.server()
    collection = make_collection(server, "pier-fake:latest", prefix="fleetwf")
    fleet.worker("w1")
    with collection.client() as c:
        for name, wf in (("say", CHILD), ("parent", PARENT)):
            made = c.put(f"/api/v1/tasks/{collection.name}/{name}", json={"workflow": wf})
            assert made.status_code in (200, 201), made.text
    tid = collection.run("parent")
    record = collection.wait("parent", tid, timeout=120)
    assert record["status"] == "completed", (record["error"], fleet.workers[0].log_tail())
    assert record["steps"]["all"]["outputs"]["text"] == "hello ada; hello bo; hello cy"
    assert record["steps"]["names"]["outputs"]["text"] == ["ad", "a,", "bo", ",c", "y,", "di"]
    store = fleet.store()
    try:
        assert ran_on(store, tid) == ["w1"]
        for ref in record["steps"]["fan"]["outputs"]["trajectory_references"]:
            child = store.get_run(ref["trajectory_id"])
            assert child.status.value == "completed" and child.parent_trajectory_id == tid
    finally:
        store.close()


class GatedModel:
    """The scripted provider the fleet's model steps call (the operator's
    upstream for openai, on 127.0.0.1): it counts every chat call by prompt,
    answers "ask ..." prompts at once and holds each "think ..." prompt until
    the test lets it go (`release`), counting how many are held at once."""

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self.held: dict[str, int] = {}  # the prompts held now (a prompt may be asked again)
        self.most_held = 0
        self._released: set[str] = set()
        self._all = threading.Event()
        self._lock = threading.Lock()
        self.server = ModelServer("127.0.0.1", reply=self.reply).start()

    def reply(self, item: Recorded) -> str:
        prompt = item.body["messages"][-1]["content"]
        with self._lock:
            self.calls[prompt] += 1
        if prompt.startswith("think "):
            with self._lock:
                self.held[prompt] = self.held.get(prompt, 0) + 1
                self.most_held = max(self.most_held, sum(self.held.values()))
            try:
                while not (self._all.is_set() or prompt in self._released):
                    time.sleep(0.05)
            finally:
                with self._lock:
                    self.held[prompt] -= 1
                    if not self.held[prompt]:
                        del self.held[prompt]
        return "said " + prompt

    def release(self, *prompts: str) -> None:
        with self._lock:
            self._released.update(prompts)

    def release_all(self) -> None:
        self._all.set()

    def holding(self) -> list[str]:
        with self._lock:
            return sorted(self.held)

    def stop(self) -> None:
        self._all.set()
        self.server.stop()


def model_collection(fleet: Fleet, model: GatedModel, tasks: dict[str, dict], **settings: str):
    fleet.settings.update({"PIER_SANDBOX_BACKEND": FAKE_BACKEND,
                           "PIER_UPSTREAMS": json.dumps({"openai": model.server.url + "/v1"}), **settings})  # fmt: skip
    server = fleet.server()
    collection = make_collection(server, "pier-fake:latest", prefix="fleetwf")
    with collection.client() as c:
        env = {"OPENAI_API_KEY": "sk-fleet"}
        assert c.patch(f"/api/v1/collections/{collection.name}/environment",
                       json={"environment_variables": env}).status_code == 200  # fmt: skip
        for name, wf in tasks.items():
            made = c.put(f"/api/v1/tasks/{collection.name}/{name}", json={"workflow": wf})
            assert made.status_code in (200, 201), made.text
    return collection


def chat(prompt_path: str) -> dict:
    return {"activity": "litellm_chat", "model": "gpt-4o-mini", "prompt_path": prompt_path}


def runs_step(store, tid: str) -> list[tuple[str, str]]:
    """(worker, step) for each time a worker took one of the run's steps, from its log."""
    lines = [e.line for e in store.events(tid)]
    return [(line.split()[1], line.split()[4]) for line in lines if " runs step " in line]


def up(worker, starts: int = 1) -> None:
    """Wait until the worker polls (its `starts`-th start, for a worker started again)."""
    wait_for(lambda: worker.log_path.read_text(errors="replace").count(" slot(s), queue ") >= starts,
             180, f"worker {worker.identity} up")  # fmt: skip


ITEMS = 8
CONCURRENCY = 3


def test_a_worker_sigkilled_mid_fan_out_ends_every_child_once_and_repeats_no_finished_step(
    fleet: Fleet,
) -> None:
    """Each child is a workflow of two model steps (ask, then think) run by
    its own Temporal workflow; the parent's fan-out opens at most 3 at once,
    whichever workers run them. A worker is SIGKILLed while three children
    it had taken wait in `think`: their `think` runs again on the other
    worker, nothing that finished runs again, and every item's one child ends
    once, completed."""
    model = GatedModel()
    try:
        child = {"init_params": {"item": ""},
                 "step_configs": {"ask": chat("init_params.item"),
                                  "think": {"activity": "text_template", "template": "think {{said}}",
                                            "said_path": "ask.outputs.text"},
                                  "answer": chat("think.outputs.text")},
                 "steps": ["ask", "think", "answer"]}  # fmt: skip
        parent = {
            "init_params": {"opening": "open", "items": [f"ask {i}" for i in range(ITEMS)]},
            "step_configs": {
                "first": chat("init_params.opening"),
                "fan": {"activity": "list_emit_await", "items_path": "init_params.items", "child_workflow_name": "say",
                        "item_param_name": "item", "max_concurrency": CONCURRENCY},
                "gather": {"activity": "extract_from_trajectories",
                           "trajectory_list_path": "fan.outputs.trajectory_references",
                           "extract_keys": {"said": "answer.outputs.text"}},
            },
            "steps": ["first", "fan", "gather"],
        }  # fmt: skip
        collection = model_collection(fleet, model, {"say": child, "parent": parent})
        doomed = fleet.worker("doomed")
        up(doomed)
        tid = collection.run("parent")
        store = fleet.store()
        think = [f"think said ask {i}" for i in range(ITEMS)]
        # the first three children, all on the only worker, wait in their last step
        wait_for(lambda: model.holding() == think[:3], 180, "three children waiting on the model")
        up(fleet.worker("steady"))
        model.release(think[0], think[1])  # two children end; two more open, on either worker
        wait_for(
            lambda: model.holding() == [think[2], think[3], think[4]], 180, "the next two children waiting"
        )
        doomed.kill()  # mid-fan-out: at least one child's step is in flight on it
        model.release_all()
        record = collection.wait("parent", tid, timeout=180)
        assert record["status"] == "completed", (record["error"], fleet.workers[-1].log_tail())
        # the gather sees every result, in item order
        assert record["steps"]["gather"]["outputs"]["said"] == [
            f"said think said ask {i}" for i in range(ITEMS)
        ]
        kids_now = store.list_runs(collection.name, "say", limit=100)[0]
        # one child per item, linked to the parent, each ended once, completed
        assert sorted(r.init_params["item"] for r in kids_now) == sorted(f"ask {i}" for i in range(ITEMS))
        refs = record["steps"]["fan"]["outputs"]["trajectory_references"]
        assert [r["trajectory_id"] for r in refs] == [
            next(k.trajectory_id for k in kids_now if k.init_params["item"] == f"ask {i}")
            for i in range(ITEMS)
        ]
        for kid in kids_now:
            assert kid.status.value == "completed" and kid.parent_trajectory_id == tid, (
                kid.status,
                kid.error,
            )
            ends = [e.line for e in store.events(kid.trajectory_id) if e.line.startswith("workflow ")]
            assert ends == [ends[0]] and ends[0].startswith("workflow completed"), ends
        # no finished step ran again: each item's `ask` was asked once, and
        # the `think` of the two children that had ended too
        assert model.calls["open"] == 1 and all(model.calls[f"ask {i}"] == 1 for i in range(ITEMS)), (
            model.calls
        )
        assert model.calls[think[0]] == model.calls[think[1]] == 1, model.calls
        retried = [i for i in (2, 3, 4) if model.calls[think[i]] == 2]
        assert 2 in retried, model.calls  # the step in flight on the killed worker ran again
        assert all(model.calls[think[i]] == 1 for i in range(ITEMS) if i not in retried), model.calls
        # never more children's model calls held at once than max_concurrency, across both workers
        assert model.most_held <= CONCURRENCY, model.most_held
        assert [s for _, s in runs_step(store, tid)] == ["first", "fan", "gather"]  # each parent step once
        workers = {w for kid in kids_now for w, _ in runs_step(store, kid.trajectory_id)}
        assert workers == {"doomed", "steady"}, workers
        store.close()
    finally:
        model.stop()


def test_a_worker_restarted_mid_workflow_resumes_it_with_no_server_up(fleet: Fleet) -> None:
    """The only worker stopped (SIGTERM, its drain shorter than the step in
    flight) and started again while no `pier serve` is up: Temporal alone
    hands the step in flight to the restarted worker, the workflow goes on
    from there, and the step that had finished is not run again."""
    model = GatedModel()
    try:
        wf = {"init_params": {"question": "ask once"},
              "step_configs": {"one": chat("init_params.question"),
                               "mid": {"activity": "text_template", "template": "think {{x}}", "x_path": "one.outputs.text"},
                               "two": chat("mid.outputs.text"),
                               "three": {"activity": "text_template", "template": "[{{x}}]", "x_path": "two.outputs.text"}},
              "steps": ["one", "mid", "two", "three"]}  # fmt: skip
        collection = model_collection(fleet, model, {"steps": wf}, PIER_DRAIN_TIMEOUT_SEC="1")
        worker = fleet.worker("w")
        up(worker)
        tid = collection.run("steps")
        wait_for(lambda: model.holding() == ["think said ask once"], 180, "the second model step waiting")
        fleet.servers[0].stop()  # no server from here on
        worker.proc.send_signal(signal.SIGTERM)  # the step in flight goes back to the fleet after the drain
        up(fleet.worker("w"), starts=2)  # the same worker, started again
        wait_for(lambda: model.calls["think said ask once"] == 2, 180, "the second model step asked again")
        model.release_all()
        store = fleet.store()
        record = wait_for(lambda: (r := store.get_run(tid)).status.terminal and r, 120, "the run ended")
        assert record.status.value == "completed", (record.error, fleet.workers[-1].log_tail())
        assert record.steps["three"].outputs.model_dump()["text"] == "[said think said ask once]"
        assert model.calls["ask once"] == 1, model.calls  # the finished step was not run again
        taken = [s for _, s in runs_step(store, tid)]
        assert taken == ["one", "mid", "two", "two", "three"], taken
        store.close()
    finally:
        model.stop()


def test_a_workflow_cancelled_mid_fan_out_cancels_its_open_children_and_starts_no_more(fleet: Fleet) -> None:
    model = GatedModel()
    try:
        child = {"init_params": {"item": ""}, "step_configs": {"answer": chat("init_params.item")},
                 "steps": ["answer"]}  # fmt: skip
        parent = {
            "init_params": {"items": [f"think {i}" for i in range(6)]},
            "step_configs": {
                "fan": {"activity": "list_emit_await", "items_path": "init_params.items", "child_workflow_name": "say",
                        "item_param_name": "item", "max_concurrency": 2},
                "after": {"activity": "text_echo", "text": "never"},
            },
            "steps": ["fan", "after"],
        }  # fmt: skip
        collection = model_collection(fleet, model, {"say": child, "parent": parent})
        up(fleet.worker("w1"))
        tid = collection.run("parent")
        wait_for(lambda: model.holding() == ["think 0", "think 1"], 180, "two children waiting on the model")
        with collection.client() as c:
            r = c.post(f"/api/v1/trajectory/{collection.name}/parent/statuses", json={tid: "cancelled"})
            assert r.status_code == 200, r.text
        record = collection.wait("parent", tid, timeout=120)
        assert record["status"] == "cancelled", record["error"]
        assert record["steps"]["after"]["status"] == "skipped"
        store = fleet.store()
        kids = store.list_runs(collection.name, "say", limit=100)[0]
        assert sorted(k.init_params["item"] for k in kids) == ["think 0", "think 1"]  # no child started after
        assert all(k.status.value == "cancelled" for k in kids), [(k.status, k.error) for k in kids]
        store.close()
        model.release_all()
        time.sleep(2)
        assert sorted(model.calls) == ["think 0", "think 1"], model.calls
    finally:
        model.stop()
