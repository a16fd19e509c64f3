"""pier's service layer: what the API's routes and the web UI's pages both do.

A service is a plain function over the server's shared state (`ApiState`) and
what a caller asked, in Python values: names, dicts, a `Caller`, the files
a form carried (anything with a filename, a size and a file, as Starlette's
UploadFile has). It answers with records (`Trajectory`, `StoredTask`,
an `Experiment`) or a small result of its own, and refuses with pier's errors
(`pier.errors`) or the server's (`pier.server.errors`: `ServiceError` with its
status, `invalid()` naming a field), which the app's error handlers answer the
same on a route and on a page.

It knows no HTTP: no Request, no Response, no FastAPI, not even through
another module (import-linter contracts in pyproject.toml say so). Reading a
body, a header or a form, and
writing an answer (JSON, a page, a stream, a redirect) is the route's or the
page's; whatever a route and a page both decide lives here, once. The
functions are synchronous: they read the store and the files, so an async
route or page calls them through `run_in_threadpool`.

One module per resource: `collections` (with its tokens, environment and
quotas), `tasks`, `runs` (starting, finding, cancelling, labels, logs,
outputs), `files`, `routines`, `experiments`, `audit`, and `stats` (the
figures of a task's runs), `ingest` (runs made elsewhere), `inputs` (the
checks every body meets)."""
