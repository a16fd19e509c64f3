// Drives the platform's own MCP server (jetty-mcp-server, pinned in
// package.json) against a real `pier serve`: the server is started over stdio
// as an MCP client would start it (JETTY_API_URL, JETTY_API_TOKEN), and every
// tool it lists is called through an MCP client, checking what pier answered.
//
// Input: PIER_SDK_CONFIG, JSON {url, admin_token, collection, token, image}.
// Output: one JSON object on stdout: {results: [{tool, ok, detail}], missing: [...], listed: [...]}
// where `missing` lists the tools the server offers that no block called.
// Exit code 0 when every call answered as expected and nothing is missing.

import assert from "node:assert/strict";
import { createRequire } from "node:module";
import path from "node:path";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StdioClientTransport } from "@modelcontextprotocol/sdk/client/stdio.js";

const config = JSON.parse(process.env.PIER_SDK_CONFIG ?? "{}");
const require = createRequire(import.meta.url);
const SERVER = path.join(path.dirname(require.resolve("jetty-mcp-server/package.json")), "dist", "index.js");
const TASK = "mcp-task";
const TERMINAL = ["completed", "failed", "cancelled"];

const RUNBOOK = `---
agent: script
snapshot: ""
image: ${config.image}
vars:
  topic: mcp
---
# MCP task

\`\`\`bash
set -e
mkdir -p /app/results
echo "report on {{topic}}" > /app/results/report.md
\`\`\`
`;
const WORKFLOW = {
  init_params: { instruction: RUNBOOK, agent: "script", snapshot: "", image: config.image, vars: { topic: "mcp" } },
  steps: ["run"],
  step_configs: { run: { activity: "runbook" } },
};

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);

/** Call one tool; its JSON answer, or throw with the server's error text. */
async function call(client, name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  const text = result.content?.map((c) => c.text ?? "").join("") ?? "";
  if (result.isError) throw new Error(`${name} answered an error: ${text.slice(0, 1500)}`);
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/** The call must fail with pier's status in the message. */
async function refused(client, name, args, status, pattern) {
  const result = await client.callTool({ name, arguments: args });
  const text = result.content?.map((c) => c.text ?? "").join("") ?? "";
  assert.ok(result.isError, `${name} should have been refused: ${text.slice(0, 500)}`);
  assert.match(text, new RegExp(`error ${status}`), text);
  if (pattern) assert.match(text, pattern);
}

async function waitRun(client, trajectoryId) {
  const deadline = Date.now() + 300_000;
  for (;;) {
    const t = await call(client, "get-trajectory", { collection: config.collection, task: TASK, trajectory_id: trajectoryId });
    if (TERMINAL.includes(t.status)) return t;
    assert.ok(Date.now() < deadline, `run ${trajectoryId} did not end`);
    await new Promise((done) => setTimeout(done, 300));
  }
}

const idOf = (started) => started.trajectory?.trajectory_id ?? started.workflow_id.split("--").pop();

async function collections(c, check) {
  await check("list-collections", async () => {
    const all = await call(c, "list-collections");
    assert.deepEqual(all.map((x) => x.name), [config.collection]);
  });
  await check("get-collection", async () => {
    assert.equal((await call(c, "get-collection", { collection: config.collection })).name, config.collection);
    await refused(c, "get-collection", { collection: "someone-else" }, 403);
  });
  await check("set-environment-vars", async () => {
    await call(c, "set-environment-vars", { collection: config.collection, variables: { MCP_VAR: "v", GONE: "x" } });
    await call(c, "set-environment-vars", { collection: config.collection, variables: { GONE: null } });
  });
  await check("check-secrets", async () => {
    const r = await call(c, "check-secrets", { collection: config.collection, required_keys: ["MCP_VAR", "GONE"] });
    assert.deepEqual(r.missing, ["GONE"], JSON.stringify(r));
    assert.equal(r.ready, false);
  });
}

async function tasks(c, check) {
  await check("create-task", async () => {
    const t = await call(c, "create-task", { collection: config.collection, name: TASK, workflow: WORKFLOW, description: "by MCP" });
    assert.equal(t.name, TASK);
  });
  await check("list-tasks", async () => {
    const list = await call(c, "list-tasks", { collection: config.collection });
    const names = (Array.isArray(list) ? list : list.tasks).map((t) => t.name);
    assert.ok(names.includes(TASK), JSON.stringify(list).slice(0, 500));
  });
  await check("get-task", async () => {
    const t = await call(c, "get-task", { collection: config.collection, task: TASK });
    assert.equal(t.workflow.init_params.agent, "script");
  });
  await check("update-task", async () => {
    const t = await call(c, "update-task", { collection: config.collection, task: TASK, description: "changed" });
    assert.equal(t.description, "changed");
  });
  await check("list-step-templates", async () => {
    const list = await call(c, "list-step-templates");
    assert.ok(JSON.stringify(list).includes("runbook"));
  });
  await check("get-step-template", async () => {
    assert.ok(JSON.stringify(await call(c, "get-step-template", { name: "runbook" })).includes("runbook"));
  });
}

async function trial(c, check) {
  await check("get-trial-status", async () => {
    assert.ok(isObject(await call(c, "get-trial-status", { collection: config.collection })));
  });
  await check("activate-trial", async () => {
    assert.ok(isObject(await call(c, "activate-trial", { collection: config.collection })));
  });
}

async function runs(c, check, ctx) {
  await check("run-workflow", async () => {
    const started = await call(c, "run-workflow", { collection: config.collection, task: TASK, init_params: { vars: { topic: "async" } } });
    assert.ok(started.workflow_id, JSON.stringify(started));
    const t = await waitRun(c, idOf(started));
    assert.equal(t.status, "completed", t.error ?? "");
    ctx.run = t;
  });
  await check("run-workflow-sync", async () => {
    const done = await call(c, "run-workflow-sync", { collection: config.collection, task: TASK });
    const t = done.trajectory ?? done;
    assert.equal(t.status, "completed", JSON.stringify(done).slice(0, 800));
  });
  await check("list-trajectories", async () => {
    const page = await call(c, "list-trajectories", { collection: config.collection, task: TASK, limit: 5 });
    assert.ok(page.trajectories.some((t) => t.trajectory_id === ctx.run.trajectory_id));
  });
  await check("get-trajectory", async () => {
    const t = await call(c, "get-trajectory", { collection: config.collection, task: TASK, trajectory_id: ctx.run.trajectory_id });
    assert.equal(t.init_params.vars.topic, "async");
  });
  await check("get-stats", async () => {
    assert.ok(isObject(await call(c, "get-stats", { collection: config.collection, task: TASK })));
  });
  await check("add-label", async () => {
    await call(c, "add-label", { collection: config.collection, task: TASK, trajectory_id: ctx.run.trajectory_id,
                                 key: "quality", value: "high", author: "mcp@example.com" });
    const t = await call(c, "get-trajectory", { collection: config.collection, task: TASK, trajectory_id: ctx.run.trajectory_id });
    assert.ok(t.labels.some((l) => l.key === "quality" && l.value === "high"));
  });
}

async function routines(c, check, ctx) {
  const at = { collection: config.collection, task: TASK };
  await check("create-routine", async () => {
    const cadences = [
      ["every-hour", { type: "hourly", minute_utc: 15 }],
      ["weekday-mornings", { type: "weekdays", hour_utc: 7, minute_utc: 30 }],
      ["mondays", { type: "weekly", day_of_week: "mon", hour_utc: 9 }],
      ["preset", { type: "manual" }],
    ];
    const made = await call(c, "create-routine", { ...at, name: "daily-summary", cadence: { type: "daily", hour_utc: 9, minute_utc: 0 },
                                                   init_params_overrides: { vars: { topic: "routine" } } });
    assert.equal(made.cadence.type, "daily");
    assert.match(made.next_run_at, /T09:00:00/);
    ctx.routine = made;
    for (const [name, cadence] of cadences) {
      const r = await call(c, "create-routine", { ...at, name, cadence, paused: name === "mondays" });
      assert.equal(r.cadence.type, cadence.type);
      assert.equal(r.paused, name === "mondays");
    }
    await refused(c, "create-routine", { ...at, name: "bad", cadence: { type: "daily" } }, 400, /hour_utc/);
    await refused(c, "create-routine", { ...at, name: "bad", cadence: { type: "weekly", hour_utc: 9 } }, 400, /day_of_week/);
    await refused(c, "create-routine", { ...at, name: "bad", cadence: { type: "manual", hour_utc: 9 } }, 400, /manual/);
    await refused(c, "create-routine", { ...at, name: "bad", cadence: { type: "daily", hour_utc: 9 },
                                         init_params_overrides: { prompt: "x" } }, 400, /prompt/);
  });
  await check("list-routines", async () => {
    const all = await call(c, "list-routines", { collection: config.collection });
    assert.equal(all.length, 5);
    assert.equal((await call(c, "list-routines", at)).length, 5);
  });
  await check("get-routine", async () => {
    const r = await call(c, "get-routine", { ...at, name: "daily-summary" });
    assert.equal(r.id, ctx.routine.id);
    assert.deepEqual(r.init_params_overrides, { vars: { topic: "routine" } });
  });
  await check("update-routine", async () => {
    let r = await call(c, "update-routine", { ...at, name: "daily-summary", cadence: { type: "hourly", minute_utc: 5 } });
    assert.equal(r.cadence.type, "hourly");
    assert.match(r.next_run_at, /:05:00/);
    r = await call(c, "update-routine", { ...at, name: "daily-summary", paused: true });
    assert.equal(r.paused, true);
    r = await call(c, "update-routine", { ...at, name: "daily-summary", secret_params: { MCP_SECRET: "s" } });
    assert.deepEqual(r.secret_params, ["MCP_SECRET"]);
  });
  await check("pause-routine", async () => {
    assert.equal((await call(c, "pause-routine", { ...at, name: "every-hour" })).status, "paused");
  });
  await check("resume-routine", async () => {
    const r = await call(c, "resume-routine", { ...at, name: "every-hour" });
    assert.equal(r.status, "active");
    assert.ok(r.next_run_at);
  });
  await check("run-routine-now", async () => {
    const started = await call(c, "run-routine-now", { ...at, name: "daily-summary" });
    assert.ok(started.workflow_id);
    const t = await waitRun(c, idOf(started));
    assert.equal(t.status, "completed", t.error ?? "");
    assert.equal(t.triggered_by_routine_id, ctx.routine.id);
    assert.equal(t.init_params.vars.topic, "routine");
    ctx.routineRun = t;
  });
  await check("list-routine-runs", async () => {
    const runs = await call(c, "list-routine-runs", { ...at, name: "daily-summary", limit: 5 });
    assert.deepEqual(runs.trajectories.map((t) => t.trajectory_id), [ctx.routineRun.trajectory_id]);
  });
  await check("delete-routine", async () => {
    await call(c, "delete-routine", { ...at, name: "daily-summary" });
    await refused(c, "get-routine", { ...at, name: "daily-summary" }, 404);
  });
}

const BLOCKS = [collections, tasks, trial, runs, routines];

async function main() {
  const transport = new StdioClientTransport({
    command: process.execPath,
    args: [SERVER],
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HOME: process.env.HOME ?? "/tmp",
           JETTY_API_URL: config.url, JETTY_API_TOKEN: config.token },
    stderr: "pipe",
  });
  const client = new Client({ name: "pier-mcp-suite", version: "1.0.0" });
  await client.connect(transport);
  const listed = (await client.listTools()).tools.map((t) => t.name);
  const results = [];
  const ctx = {};
  const check = async (tool, body) => {
    try {
      await body();
      results.push({ tool, ok: true });
    } catch (e) {
      results.push({ tool, ok: false, detail: `${e?.name}: ${e?.message}`.slice(0, 2000) });
    }
  };
  for (const block of BLOCKS) await block(client, check, ctx);
  await client.close();
  const driven = new Set(results.map((r) => r.tool));
  const missing = listed.filter((name) => !driven.has(name));
  process.stdout.write(JSON.stringify({ results, missing, listed }) + "\n");
  process.exit(results.every((r) => r.ok) && missing.length === 0 ? 0 : 1);
}

await main();
