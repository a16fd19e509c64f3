"""Extra CA certificates inside sandboxes (PIER_CA_BUNDLE): the bundle is copied to
CA_PATH at set up and every common TLS client is pointed at it."""

from __future__ import annotations

CA_PATH = "/etc/pier/ca-bundle.crt"
CA_ENV_NAMES = (
    "SSL_CERT_FILE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
    "UV_NATIVE_TLS",
)


def ca_env(path: str = CA_PATH) -> dict[str, str]:
    env = {name: path for name in CA_ENV_NAMES}
    env["UV_NATIVE_TLS"] = "1"  # uv reads SSL_CERT_FILE only with native TLS
    return env
