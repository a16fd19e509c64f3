// pier web UI: the live parts. A run's log follows its Server-Sent Events
// (EventSource resumes after a reconnect with Last-Event-ID); the run's summary
// and the runs list are refreshed from the server's own HTML fragments.
"use strict";
(function () {
  const PART = "X-Pier-Part";

  async function fragment(part) {
    const response = await fetch(location.href, { headers: { [PART]: part }, credentials: "same-origin" });
    if (!response.ok) throw new Error("HTTP " + response.status);
    return response.text();
  }

  function followRun(live) {
    const log = document.getElementById("log");
    const state = document.getElementById("log-state");
    const id = live.dataset.run;
    let done = false;
    const refresh = async (force) => {
      if (!force && live.contains(document.activeElement)) return; // never under a typing user
      try {
        live.innerHTML = await fragment("live");
      } catch (e) { /* the next tick tries again */ }
    };
    const timer = setInterval(() => { if (!document.hidden) refresh(); }, 2000);
    // The stages move with the log: a line of another stage fetches them at
    // once (they hold nothing a user types in or focuses, so never wait).
    let shownStage = null;
    const refreshStages = async () => {
      const stages = document.getElementById("run-stages");
      if (!stages) return;
      try { stages.innerHTML = await fragment("stages"); } catch (e) { /* the next line or tick tries again */ }
    };
    const after = log.dataset.lastSeq || "0";
    const source = new EventSource("/api/v1/runs/" + encodeURIComponent(id) + "/events?last_event_id=" + after);
    source.addEventListener("log", (event) => {
      const data = JSON.parse(event.data);
      const atBottom = log.scrollTop + log.clientHeight >= log.scrollHeight - 8;
      const span = document.createElement("span");
      span.dataset.seq = data.seq;
      span.textContent = (data.stage ? "[" + data.stage + "] " : "") + data.line + "\n";
      log.appendChild(span);
      log.dataset.lastSeq = data.seq;
      if (atBottom) log.scrollTop = log.scrollHeight;
      if (data.stage && data.stage !== shownStage) {
        shownStage = data.stage;
        refreshStages();
      }
    });
    source.addEventListener("end", async (event) => {
      done = true;
      source.close();
      clearInterval(timer);
      const status = JSON.parse(event.data).status;
      state.textContent = "The run has ended: " + status + ".";
      await refresh(true);
      live.dataset.ended = "yes";
    });
    source.addEventListener("error", () => {
      if (!done) state.textContent = "Connection lost: reconnecting…";
    });
    source.addEventListener("open", () => { if (!done) state.textContent = "Following the live log…"; });
  }

  function followList(rows) {
    const total = document.getElementById("runs-total");
    setInterval(async () => {
      // not while hidden, nor under a keyboard user's focus
      if (document.hidden || rows.contains(document.activeElement)) return;
      try {
        const response = await fetch(location.href, { headers: { [PART]: "rows" }, credentials: "same-origin" });
        if (!response.ok) return;
        const html = await response.text();
        if (html !== rows.dataset.html) {
          rows.innerHTML = html;
          rows.dataset.html = html;
        }
        const count = response.headers.get("X-Pier-Total");
        if (total && count !== null) total.textContent = count;
      } catch (e) { /* the next tick tries again */ }
    }, 3000);
  }

  // A form that ends or deletes something asks first (data-confirm says what).
  document.addEventListener("submit", (event) => {
    const question = event.target.dataset && event.target.dataset.confirm;
    if (question && !window.confirm(question)) event.preventDefault();
  });

  function followExperiment(live) {
    // the matrix and figures, re-rendered by the server every 2 s until the experiment ends
    const timer = setInterval(async () => {
      if (document.hidden || live.contains(document.activeElement)) return;
      try {
        const html = await fragment("matrix");
        live.innerHTML = html;
        const status = live.querySelector("#experiment-status");
        if (status && status.dataset.status !== "running") {
          live.dataset.running = "no";
          clearInterval(timer);
        }
      } catch (e) { /* the next tick tries again */ }
    }, 2000);
  }

  document.addEventListener("DOMContentLoaded", () => {
    const experiment = document.getElementById("experiment-live");
    if (experiment && experiment.dataset.running === "yes") followExperiment(experiment);
    const live = document.getElementById("run-live");
    if (live && live.dataset.ended === "no") followRun(live);
    const rows = document.getElementById("runs-rows");
    if (rows) followList(rows);
  });
})();
