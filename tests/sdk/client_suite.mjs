// Drives the platform's official TypeScript client (@jetty/sdk, pinned in
// package.json) against a real `pier serve`, one block of JettyClient methods
// at a time, checking every answer against the shapes dist/types.d.ts declares.
//
// Input: PIER_SDK_CONFIG, JSON {url, admin_token, collection, token, image}.
// Output: one JSON object on stdout: {results: [{method, ok, detail}], missing: [...]}
// where `missing` lists the public JettyClient methods no block drove.
// Exit code 0 when every check passed and nothing is missing.
//
// A block is an async function (ctx, check) => void; add one to BLOCKS to drive
// more methods.

import assert from "node:assert/strict";
import {
  JettyApiError,
  JettyClient,
  JettyNotFoundError,
  TERMINAL_STATUSES,
  gradeWithJetty,
  parseWorkflowId,
} from "@jetty/sdk";

const config = JSON.parse(process.env.PIER_SDK_CONFIG ?? "{}");
const STATUSES = ["pending", "running", "completed", "failed", "cancelled", "archived"];

// ---------------------------------------------------------------------------
// Shapes from dist/types.d.ts
// ---------------------------------------------------------------------------

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);
const isIso = (v) => typeof v === "string" && !Number.isNaN(Date.parse(v));

function assertLabel(label) {
  assert.ok(isObject(label), "a label is an object");
  assert.equal(typeof label.key, "string");
  assert.equal(typeof label.value, "string");
  assert.ok(isIso(label.created), `label.created is a date: ${label.created}`);
  assert.equal(typeof label.author, "string");
}

function assertStep(step, name, ended) {
  assert.ok(isObject(step.inputs), `${name}.inputs is an object`);
  assert.ok(isObject(step.outputs), `${name}.outputs is an object`);
  assert.equal(typeof step.activity, "string");
  assert.equal(typeof step.key, "string");
  assert.ok(Array.isArray(step.depends_on));
  assert.ok(isIso(step.created), `${name}.created is a date`);
  if (ended) assert.ok(isIso(step.ended), `${name}.ended is a date once the run ended`);
  assert.ok(step.duration_seconds === null || typeof step.duration_seconds === "number");
  assert.equal(typeof step.author, "string");
  assert.ok(isObject(step.origin));
  assert.ok(isObject(step.config));
}

function assertTrajectory(t) {
  assert.ok(isObject(t), "a trajectory is an object");
  for (const key of ["name", "trajectory_id", "storage_path", "author", "metadata_uri"]) {
    assert.equal(typeof t[key], "string", `trajectory.${key} is a string`);
  }
  assert.ok(STATUSES.includes(t.status), `status ${t.status} is a TrajectoryStatus`);
  assert.ok(isObject(t.attributes));
  assert.equal(typeof t.attributes.asset_type, "string");
  assert.equal(typeof t.attributes.asset_filename, "string");
  assert.ok(isIso(t.attributes.created));
  assert.ok(isObject(t.attributes.params));
  assert.ok(isIso(t.created) && isIso(t.updated), "created and updated are dates");
  assert.ok(isObject(t.steps), "steps is a Record<string, Step>");
  const ended = TERMINAL_STATUSES.includes(t.status);
  for (const [name, step] of Object.entries(t.steps)) assertStep(step, `steps.${name}`, ended);
  assert.ok(Array.isArray(t.labels));
  t.labels.forEach(assertLabel);
  assert.ok(Array.isArray(t.total_steps) && t.total_steps.every((s) => typeof s === "string"));
  assert.ok(Array.isArray(t.completed_steps) && t.completed_steps.every((s) => typeof s === "string"));
  assert.ok(isObject(t.init_params));
  assert.ok(isObject(t.step_configs));
  assert.ok(t.org_id === null || typeof t.org_id === "string");
  assert.ok(t.error === null || typeof t.error === "string", "error is string | null");
}

function assertRunbookOutputs(t) {
  const out = t.steps.run.outputs;
  assert.equal(t.steps.run.activity, "runbook");
  for (const key of ["files", "results_files", "primary_files", "checks", "stages"]) {
    assert.ok(Array.isArray(out[key]), `outputs.${key} is a list`);
  }
  assert.equal(typeof out.success, "boolean");
  assert.ok(isObject(out.usage));
  assert.ok("eval" in out && "agent" in out && "model" in out);
  assert.ok(out.files.every((k) => k.startsWith(`${config.collection}/${t.name}/${t.trajectory_id}/`)));
}

function assertWorkflowResponse(r) {
  assert.ok(isObject(r));
  assert.equal(typeof r.message, "string");
  assert.equal(typeof r.workflow_id, "string");
  assert.ok(isObject(r.result));
  assert.ok(isObject(r.trajectory));
  assert.equal(typeof r.metadata, "string");
  const { trajectoryId } = parseWorkflowId(r.workflow_id);
  assert.equal(trajectoryId, r.trajectory.trajectory_id);
  assertTrajectory(r.trajectory);
}

async function refused(promise, status, pattern) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof JettyApiError, `a JettyApiError, got ${e}`);
    assert.equal(e.status, status, `status ${e.status}: ${e.body}`);
    if (pattern) assert.match(e.body, pattern);
    return e;
  }
  assert.fail(`expected HTTP ${status}, the call succeeded`);
}

// ---------------------------------------------------------------------------
// The task every run uses: a script agent writing a grade and a report
// ---------------------------------------------------------------------------

const TASK = "sdk-task";
const RUNBOOK = `---
agent: script
snapshot: ""
image: ${JSON.stringify(config.image)}
vars:
  topic: none
primary_outputs: [report.md]
---
# sdk

\`\`\`bash
set -e
mkdir -p /app/results
printf '{"total": 0.75, "pass": true}' > /app/results/grade.json
echo "report on {{topic}}" > /app/results/report.md
ls /app/assets > /app/results/assets.txt 2>/dev/null || true
echo "wrote the report"
\`\`\`
`;
const WORKFLOW = {
  init_params: { instruction: RUNBOOK, agent: "script", snapshot: "", image: config.image },
  steps: ["run"],
  step_configs: { run: { activity: "runbook" } },
};

// ---------------------------------------------------------------------------
// Blocks
// ---------------------------------------------------------------------------

async function collections(ctx, check) {
  await check("listCollections", async () => {
    const mine = await ctx.jetty.listCollections();
    assert.ok(Array.isArray(mine), "an array");
    assert.deepEqual(mine.map((c) => c.name), [config.collection], "a collection token sees its own");
    const all = await ctx.admin.listCollections();
    assert.ok(all.some((c) => c.name === config.collection), "the admin sees every collection");
  });
  await check("getCollection", async () => {
    const c = await ctx.jetty.getCollection(config.collection);
    assert.equal(c.name, config.collection);
    await refused(ctx.jetty.getCollection("someone-else"), 403);
  });
  await check("setEnvironmentVars", async () => {
    await ctx.jetty.setEnvironmentVars(config.collection, { SDK_VAR: "v" });
  });
  await check("getCollectionEnvironment", async () => {
    const env = await ctx.jetty.getCollectionEnvironment(config.collection);
    assert.ok(Object.keys(env.environment_variables).includes("SDK_VAR"));
    assert.ok(!JSON.stringify(env).includes('"v"'), "no value is returned");
  });
}

async function tasks(ctx, check) {
  await check("createTask", async () => {
    const task = await ctx.jetty.createTask(config.collection, TASK, WORKFLOW, "made by the SDK");
    assert.equal(task.name, TASK);
    assert.equal(task.description, "made by the SDK");
    assert.ok(isObject(task.workflow));
    const bad = { steps: ["run"], step_configs: { run: { activity: "http_get" } } };
    await refused(ctx.jetty.createTask(config.collection, "sdk-bad", bad), 422, /http_get.*runbook/s);
  });
  await check("listTasks", async () => {
    const list = await ctx.jetty.listTasks(config.collection);
    assert.ok(Array.isArray(list), "an array");
    assert.ok(list.some((t) => t.name === TASK && typeof t.description === "string"));
  });
  await check("getTask", async () => {
    const task = await ctx.jetty.getTask(config.collection, TASK);
    assert.equal(task.name, TASK);
    assert.equal(task.workflow.init_params.agent, "script");
    assert.equal(task.description, "made by the SDK");
  });
  await check("updateTask", async () => {
    let task = await ctx.jetty.updateTask(config.collection, TASK, { description: "changed" });
    assert.equal(task.description, "changed");
    assert.equal(task.workflow.init_params.agent, "script", "the workflow is kept");
    task = await ctx.jetty.updateTask(config.collection, TASK, { workflow: WORKFLOW });
    assert.equal(task.description, "changed", "the description is kept");
  });
}

async function trial(ctx, check) {
  await check("getTrialStatus", async () => {
    const status = await ctx.jetty.getTrialStatus(config.collection);
    assert.equal(status.available, true);
    assert.equal(typeof status.runs_remaining, "number");
  });
  await check("activateTrial", async () => {
    const status = await ctx.jetty.activateTrial(config.collection);
    assert.equal(status.active, true);
  });
}

async function runs(ctx, check) {
  await check("runWorkflow", async () => {
    const started = await ctx.jetty.runWorkflow(config.collection, TASK, { vars: { topic: "async" } });
    assertWorkflowResponse(started);
    assert.equal(started.trajectory.steps.run.inputs.vars.topic, "async");
    ctx.asyncRun = started.trajectory.trajectory_id;
    await refused(
      ctx.jetty.runWorkflow(config.collection, TASK, {}, { subscriptionCredential: "nous" }),
      422,
      /subscription_credential/,
    );
  });
  await check("runWorkflowSync", async () => {
    const done = await ctx.jetty.runWorkflowSync(config.collection, TASK, { vars: { topic: "sync" } }, {
      subscriptionCredential: "anthropic",
    });
    assertWorkflowResponse(done);
    assert.equal(done.trajectory.status, "completed", done.trajectory.error);
    assert.equal(done.result.success, true);
    assert.equal(done.trajectory.init_params.model_provider, "anthropic", "the subscription picks the provider");
  });
  await check("runWithFiles", async () => {
    const started = await ctx.jetty.runWithFiles(config.collection, TASK, {}, [
      { filename: "case.json", data: JSON.stringify({ ticket: 1 }), contentType: "application/json" },
    ]);
    assertWorkflowResponse(started);
    const paths = started.trajectory.init_params.file_paths;
    assert.ok(Array.isArray(paths) && paths[0].endsWith("case.json"), `file_paths: ${paths}`);
    ctx.filesRun = started.trajectory.trajectory_id;
  });
  await check("runAndWait", async () => {
    const polls = [];
    const run = await ctx.jetty.runAndWait(config.collection, TASK, { vars: { topic: "wait" } }, {
      pollMs: 300,
      timeoutMs: 300_000,
      onPoll: (t) => polls.push(t.status),
    });
    assertTrajectory(run);
    assertRunbookOutputs(run);
    assert.equal(run.status, "completed");
    assert.deepEqual(run.completed_steps, ["run"]);
    assert.deepEqual(run.total_steps, ["run"]);
    assert.equal(run.steps.run.outputs.success, true);
    assert.deepEqual(run.steps.run.outputs.primary_files, ["report.md"]);
    assert.ok(run.steps.run.outputs.stages.some((s) => s.name === "run_agent" && s.status === "completed"));
    assert.ok(polls.length > 0);
    ctx.run = run;
  });
}

async function trajectories(ctx, check) {
  await check("getTrajectory", async () => {
    const t = await ctx.jetty.getTrajectory(config.collection, TASK, ctx.run.trajectory_id);
    assertTrajectory(t);
    assertRunbookOutputs(t);
    assert.equal(t.trajectory_id, ctx.run.trajectory_id);
  });
  await check("listTrajectories", async () => {
    const page = await ctx.jetty.listTrajectories(config.collection, TASK, 2, 1);
    assert.ok(Array.isArray(page.trajectories));
    assert.equal(page.trajectories.length, 2);
    page.trajectories.forEach(assertTrajectory);
    assert.equal(typeof page.total, "number");
    assert.ok(page.total >= 3);
    assert.equal(page.page, 1);
    assert.equal(page.limit, 2);
  });
  await check("addLabel", async () => {
    await ctx.jetty.addLabel(config.collection, TASK, ctx.run.trajectory_id, "eval.grade", "0.75", "sdk");
    const t = await ctx.jetty.getTrajectory(config.collection, TASK, ctx.run.trajectory_id);
    const label = t.labels.find((l) => l.key === "eval.grade");
    assert.ok(label, "the label shows on the trajectory");
    assert.equal(label.value, "0.75");
    assert.equal(label.author, "sdk");
    await refused(ctx.jetty.addLabel(config.collection, TASK, ctx.run.trajectory_id, "", "x", "sdk"), 422, /key/);
  });
  await check("downloadFile", async () => {
    const key = ctx.run.steps.run.outputs.files.find((k) => k.endsWith("report.md"));
    assert.ok(key, `a storage key for report.md in ${ctx.run.steps.run.outputs.files}`);
    const file = await ctx.jetty.downloadFile(key);
    assert.equal(new TextDecoder().decode(file.bytes).trim(), "report on wait");
    assert.equal(file.filename, "report.md");
    assert.match(file.contentType ?? "", /markdown/);
  });
  await check("getWorkflowLogs", async () => {
    const workflowId = `${config.collection}-${TASK}--${ctx.run.trajectory_id}`;
    const logs = await ctx.jetty.getWorkflowLogs(workflowId);
    assert.equal(logs.workflow_id, workflowId);
    assert.ok(logs.logs.some((e) => e.line.includes("wrote the report")), "the agent's output is in the log");
  });
  await check("ingestTrajectory", async () => {
    const payload = {
      input: { question: "2+2" },
      output: { answer: 4 },
      status: "completed",
      scores: { accuracy: 1, style: 0.5 },
      labels: { suite: "smoke" },
      cost_usd: 0.02,
      source: "eve",
      eval_id: "e-1",
      author: "sdk",
      trajectory_id: "sdk-ingested-1",
    };
    const first = await ctx.jetty.ingestTrajectory(config.collection, "sdk-evals", payload);
    assert.equal(first.trajectory_id, "sdk-ingested-1");
    assert.equal(first.name, "sdk-evals");
    assert.equal(first.status, "completed");
    assert.equal(typeof first.storage_path, "string");
    first.labels.forEach(assertLabel);
    const keys = first.labels.map((l) => l.key).sort();
    assert.deepEqual(keys, ["cost_est_usd", "score.accuracy", "score.style", "suite"]);
    const again = await ctx.jetty.ingestTrajectory(config.collection, "sdk-evals", { ...payload, scores: { accuracy: 0 } });
    assert.equal(again.trajectory_id, first.trajectory_id, "idempotent on trajectory_id");
    assert.equal(again.labels.find((l) => l.key === "score.accuracy").value, "0.0");
    const stored = await ctx.jetty.getTrajectory(config.collection, "sdk-evals", "sdk-ingested-1");
    assertTrajectory(stored);
    assert.equal(stored.attributes.params.source, "eve");
    const list = await ctx.jetty.listTrajectories(config.collection, "sdk-evals");
    assert.equal(list.total, 1, "a re-push overwrites in place");
    await refused(ctx.jetty.ingestTrajectory(config.collection, "sdk-evals", { status: "exploded" }), 422, /status/);
  });
  await check("getStats", async () => {
    const stats = await ctx.jetty.getStats(config.collection, TASK);
    assert.ok(stats.total >= 3);
    assert.ok(isObject(stats.by_status));
    assert.ok(stats.by_status.completed >= 2);
    assert.equal(typeof stats.success_rate, "number");
    assert.equal(typeof stats.duration_seconds.mean, "number");
    assert.equal(typeof stats.cost_usd, "number");
  });
}

async function templates(ctx, check) {
  await check("listStepTemplates", async () => {
    // The platform's shape: {templates, categories, total_count} (the SDK passes it through).
    const list = await ctx.jetty.listStepTemplates();
    assert.ok(Array.isArray(list.templates) && list.total_count === list.templates.length);
    const runbook = list.templates.find((t) => t.name === "runbook");
    assert.ok(runbook && isObject(runbook.config_schema));
  });
  await check("getStepTemplate", async () => {
    const t = await ctx.jetty.getStepTemplate("runbook");
    assert.equal(t.name, "runbook");
    assert.ok(isObject(t.config_schema.properties));
    try {
      await ctx.jetty.getStepTemplate("http_get");
      assert.fail("an unknown template is 404");
    } catch (e) {
      assert.ok(e instanceof JettyNotFoundError, String(e));
      assert.match(e.body, /runbook/);
    }
  });
}

async function grading(ctx, check) {
  await check("gradeWithJetty", async () => {
    const { grade, trajectoryId, gradeKey } = await gradeWithJetty(ctx.jetty, config.collection, TASK, {
      files: [{ filename: "case.json", data: JSON.stringify({ ticket: 2 }) }],
      labels: (g) => ({ "eval.pass": String(g.pass) }),
      pollMs: 300,
      timeoutMs: 300_000,
    });
    assert.deepEqual(grade, { total: 0.75, pass: true });
    assert.ok(gradeKey.endsWith("grade.json"));
    const t = await ctx.jetty.getTrajectory(config.collection, TASK, trajectoryId);
    assert.equal(t.labels.find((l) => l.key === "eval.pass")?.value, "true");
  });
}

function assertRoutine(r, name) {
  assert.ok(isObject(r), "a routine is an object");
  assert.equal(typeof r.id, "number");
  assert.equal(r.name, name);
  assert.equal(typeof r.cron_expression, "string");
  assert.equal(typeof r.timezone, "string");
  assert.ok(isObject(r.init_params));
  assert.ok(["active", "paused"].includes(r.status), `status ${r.status}`);
  assert.ok(r.next_run_at === null || isIso(r.next_run_at));
}

async function routines(ctx, check) {
  const NAME = "sdk-weekly";
  await check("createRoutine", async () => {
    const body = { name: NAME, cron_expression: "0 9 * * 1", timezone: "Europe/Berlin", init_params: {} };
    const made = await ctx.jetty.createRoutine(config.collection, TASK, body);
    assertRoutine(made, NAME);
    assert.equal(made.status, "active");
    assert.ok(isIso(made.next_run_at), "an active routine knows its next tick");
    ctx.routine = made;
    await refused(ctx.jetty.createRoutine(config.collection, TASK, { ...body, name: "bad", cron_expression: "every day" }), 422, /cron_expression/);
    await refused(ctx.jetty.createRoutine(config.collection, TASK, { ...body, name: "bad", timezone: "Mars/Olympus" }), 422, /timezone/);
  });
  await check("listRoutines", async () => {
    for (const list of [await ctx.jetty.listRoutines(config.collection), await ctx.jetty.listRoutines(config.collection, TASK)]) {
      assert.ok(Array.isArray(list), "routines come as an array");
      assert.ok(list.some((r) => r.name === NAME));
      list.forEach((r) => assertRoutine(r, r.name));
    }
  });
  await check("getRoutine", async () => {
    const r = await ctx.jetty.getRoutine(config.collection, TASK, NAME);
    assertRoutine(r, NAME);
    assert.equal(r.id, ctx.routine.id);
    await refused(ctx.jetty.getRoutine(config.collection, TASK, "no-such-routine"), 404);
  });
  await check("updateRoutine", async () => {
    const r = await ctx.jetty.updateRoutine(config.collection, TASK, NAME, { cron_expression: "30 8 * * 1-5" });
    assertRoutine(r, NAME);
    assert.equal(r.cron_expression, "30 8 * * 1-5");
    assert.equal(r.timezone, "Europe/Berlin", "fields not sent are kept");
  });
  await check("pauseRoutine", async () => {
    const r = await ctx.jetty.pauseRoutine(config.collection, TASK, NAME);
    assert.equal(r.status, "paused");
  });
  await check("resumeRoutine", async () => {
    const r = await ctx.jetty.resumeRoutine(config.collection, TASK, NAME);
    assert.equal(r.status, "active");
    assert.ok(isIso(r.next_run_at));
  });
  await check("runRoutineNow", async () => {
    const started = await ctx.jetty.runRoutineNow(config.collection, TASK, NAME);
    assertWorkflowResponse(started);
    assert.equal(started.trajectory.triggered_by_routine_id, ctx.routine.id);
    const deadline = Date.now() + 300_000;
    let t = started.trajectory;
    while (!TERMINAL_STATUSES.includes(t.status)) {
      assert.ok(Date.now() < deadline, "the routine's run did not end");
      await new Promise((done) => setTimeout(done, 300));
      t = await ctx.jetty.getTrajectory(config.collection, TASK, started.trajectory.trajectory_id);
    }
    assert.equal(t.status, "completed", t.error ?? "");
    ctx.routineRun = t;
  });
  await check("listRoutineRuns", async () => {
    const runs = await ctx.jetty.listRoutineRuns(config.collection, TASK, NAME, 5);
    assert.equal(runs.routine_id, ctx.routine.id);
    assert.ok(Array.isArray(runs.trajectories));
    assert.deepEqual(runs.trajectories.map((t) => t.trajectory_id), [ctx.routineRun.trajectory_id]);
    runs.trajectories.forEach(assertTrajectory);
    assert.equal(runs.trajectories[0].triggered_by_routine_id, ctx.routine.id);
  });
  await check("deleteRoutine", async () => {
    await ctx.jetty.deleteRoutine(config.collection, TASK, NAME);
    await refused(ctx.jetty.getRoutine(config.collection, TASK, NAME), 404);
    const t = await ctx.jetty.getTrajectory(config.collection, TASK, ctx.routineRun.trajectory_id);
    assert.equal(t.status, "completed", "its runs stay readable");
  });
}

async function removal(ctx, check) {
  await check("deleteTask", async () => {
    await ctx.jetty.deleteTask(config.collection, TASK);
    await refused(ctx.jetty.getTask(config.collection, TASK), 404);
    const t = await ctx.jetty.getTrajectory(config.collection, TASK, ctx.run.trajectory_id);
    assert.equal(t.status, "completed", "its runs stay readable");
    const page = await ctx.jetty.listTrajectories(config.collection, TASK);
    assert.ok(page.total >= 3);
  });
}

// Each block may leave things in ctx for the next ones: keep this order.
export const BLOCKS = [collections, tasks, trial, runs, trajectories, templates, grading, routines, removal];

// ---------------------------------------------------------------------------

async function main() {
  const ctx = {
    jetty: new JettyClient({ apiUrl: config.url, token: config.token, maxRetries: 0 }),
    admin: new JettyClient({ apiUrl: config.url, token: config.admin_token, maxRetries: 0 }),
  };
  const results = [];
  const check = async (method, body) => {
    try {
      await body();
      results.push({ method, ok: true });
    } catch (e) {
      results.push({ method, ok: false, detail: `${e?.name}: ${e?.message}`.slice(0, 2000) });
    }
  };
  for (const block of BLOCKS) await block(ctx, check);
  const driven = new Set(results.map((r) => r.method));
  const publicMethods = Object.getOwnPropertyNames(JettyClient.prototype).filter(
    (name) => name !== "constructor" && !["seg", "buildRunForm"].includes(name),
  );
  const missing = publicMethods.filter((m) => !driven.has(m));
  process.stdout.write(JSON.stringify({ results, missing, public: publicMethods }) + "\n");
  process.exit(results.every((r) => r.ok) && missing.length === 0 ? 0 : 1);
}

await main();
