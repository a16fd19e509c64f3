"""The server's control plane, which uses no HTTP: the dispatcher, the live-log
buses, recovery, tokens, the server's state and the service layer that the API
(`pier.api`) and the web UI (`pier.web`) both call (docs/architecture.md)."""
