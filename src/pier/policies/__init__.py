"""The server's run policies, which a local `pier run` never uses: webhooks,
collection quotas and trial keys; below both the server (`pier.server`) and the
executors that apply them to a run (docs/architecture.md)."""
