"""The generated Dockerfile and what every pier-built image shares:
the CA bundle wiring and the content-hash tag that makes a build reusable."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pier.errors import InputError

# The bundle travels in the build context under this name and lands at CA_PATH.
CA_CONTEXT_NAME = "pier-ca.crt"
CA_PATH = "/etc/pier/ca-bundle.crt"
# Every TLS client a sandbox is likely to run reads one of these (uv and
# openssl: SSL_CERT_FILE; pip: PIP_CERT; Node: NODE_EXTRA_CA_CERTS; ...).
CA_ENV_VARS = (
    "SSL_CERT_FILE",
    "PIP_CERT",
    "REQUESTS_CA_BUNDLE",
    "NODE_EXTRA_CA_CERTS",
    "CURL_CA_BUNDLE",
    "GIT_SSL_CAINFO",
)
UV_VERSION = "0.13.9"
BUILD_REPO = "pier-build"

# The one grammar of every value a caller gives that reaches a generated
# Dockerfile (validate, the API and the CLI all refuse by it, through
# check_build_inputs): ASCII only, no whitespace, quotes, backslashes, `#` or
# `$`, never a leading `-`. Lists travel in files of the build context, one entry
# a line, so even an entry that passed could not become an instruction.
# Debian: name, then an optional :arch, then =version or /release.
_APT_SPEC = re.compile(r"[a-z0-9][a-z0-9+.-]*(:[a-z0-9-]+)?(=[A-Za-z0-9.+~:-]+|/[a-z0-9.-]+)?", re.ASCII)
# PEP 508 without URLs, markers or spaces: name, [extras], comma-separated version clauses.
_PIP_NAME = r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?"
_PIP_EXTRAS = rf"\[{_PIP_NAME}(,{_PIP_NAME})*\]"
_PIP_CLAUSE = r"(===|==|!=|~=|>=|<=|>|<)[A-Za-z0-9.*+!_-]+"
_PIP_SPEC = re.compile(rf"{_PIP_NAME}({_PIP_EXTRAS})?({_PIP_CLAUSE}(,{_PIP_CLAUSE})*)?", re.ASCII)
# An image reference: [registry[:port]/]path[:tag][@digest], Docker's own grammar.
_REF_COMPONENT = r"[a-z0-9]+(?:(?:\.|_|__|-+)[a-z0-9]+)*"
_REF_REGISTRY = (
    r"[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)*(?::[0-9]+)?"
)
_IMAGE_REF = re.compile(
    rf"(?:{_REF_REGISTRY}/)?{_REF_COMPONENT}(?:/{_REF_COMPONENT})*(?::[A-Za-z0-9_][A-Za-z0-9_.-]{{0,127}})?"
    r"(?:@sha256:[0-9a-f]{64})?",
    re.ASCII,
)
MAX_SPEC = 255
# The lists' names in the build context, and where the build reads them.
APT_LIST = "pier-apt.txt"
PIP_LIST = "pier-requirements.txt"
LISTS_DIR = "/tmp/pier-build"


STEP_MARK = "# pier-step:"


def step_titles(dockerfile: str) -> dict[int, str]:
    """The builder's step number (1 is FROM) -> what the `# pier-step: ...` comment
    above that instruction says it installs, for a build's progress lines."""
    titles: dict[int, str] = {}
    step, pending, continued = 0, "", False
    for raw in dockerfile.splitlines():
        line = raw.strip()
        if continued:
            continued = line.endswith("\\")
            continue
        if line.startswith(STEP_MARK):
            pending = line[len(STEP_MARK) :].strip()
            continue
        if not line or line.startswith("#"):
            continue
        step += 1
        continued = line.endswith("\\")
        if pending:
            titles[step], pending = pending, ""
    return titles


def ca_env() -> dict[str, str]:
    """The environment that points every TLS client at pier's CA bundle."""
    return dict.fromkeys(CA_ENV_VARS, CA_PATH)


def ca_setup_lines(ca_bundle: bool) -> list[str]:
    """Dockerfile lines that install the CA bundle from the build context, so TLS
    through an intercepting proxy works both in the build and in the sandbox."""
    if not ca_bundle:
        return []
    env = " ".join(f"{name}={path}" for name, path in ca_env().items())
    return [f"COPY {CA_CONTEXT_NAME} {CA_PATH}", f"ENV {env}"]


def validate_packages(kind: str, packages: Iterable[str]) -> list[str]:
    """The packages sorted and deduplicated (so the same set builds the same image).
    Raises InputError naming the first entry that is not a package spec of the
    grammar above (nothing is stripped or fixed: what is refused is said)."""
    pattern = _APT_SPEC if kind == "apt" else _PIP_SPEC
    clean: set[str] = set()
    for entry in packages:
        if not isinstance(entry, str) or len(entry) > MAX_SPEC or not pattern.fullmatch(entry):
            raise InputError(
                f"{kind}_packages: {entry!r} is not a valid {kind} package name "
                f"(expected e.g. {'ffmpeg or jq=1.6-2.1' if kind == 'apt' else 'pandas, six>=1.16 or rich[jupyter]'}"
                ", without spaces, quotes or markers)"
            )
        clean.add(entry)
    return sorted(clean)


def check_image_ref(field: str, ref: object) -> str:
    """ref, when it is an image reference (registry/path:tag@digest). Raises
    InputError naming the field otherwise."""
    if not isinstance(ref, str) or len(ref) > MAX_SPEC or not _IMAGE_REF.fullmatch(ref):
        raise InputError(
            f"{field}: {ref!r} is not a valid image reference (expected e.g. debian:bookworm or "
            "registry.example.com:5000/team/image:1.2, lower-case path, no spaces)"
        )
    return ref


def check_build_inputs(
    base_image: str | None, apt_packages: Sequence[str], pip_packages: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The one check of what a caller gives for a generated Dockerfile: the base
    image (when given) and the package lists, sorted. Raises InputError."""
    if base_image is not None:
        check_image_ref("base_image", base_image)
    return validate_packages("apt", apt_packages), validate_packages("pip", pip_packages)


@dataclass(frozen=True)
class Recipe:
    """A Dockerfile and the files its build context holds beside it."""

    dockerfile: str
    files: tuple[tuple[str, bytes], ...] = ()


def _list_file(entries: Sequence[str]) -> bytes:
    return "".join(f"{entry}\n" for entry in entries).encode()


def _base_tools() -> list[str]:
    # python3 is installed only where the base lacks it: checks need it, and a
    # python:* base already has a newer one first on PATH.
    return [
        "RUN apt-get update && apt-get install -y --no-install-recommends git curl ca-certificates"
        " && (command -v python3 >/dev/null"
        " || apt-get install -y --no-install-recommends python3 python3-pip python3-venv)"
        " && rm -rf /var/lib/apt/lists/*",
        f"RUN python3 -m pip install --no-cache-dir uv=={UV_VERSION}",
    ]


def generate_recipe(
    base_image: str,
    apt_packages: Sequence[str] = (),
    pip_packages: Sequence[str] = (),
    ca_bundle: bool = False,
) -> Recipe:
    """The generated Dockerfile (the third sandbox source): base_image, git, curl and uv, then
    apt_packages, then pip_packages, the lists read from files of the build
    context. Same input, same recipe. Raises InputError."""
    apt, pip = check_build_inputs(base_image or "", apt_packages, pip_packages)
    files = {APT_LIST: apt, PIP_LIST: pip}
    given = {name: entries for name, entries in files.items() if entries}
    lines = [
        "# Generated by pier: base image, git, curl and uv, then apt and pip packages.",
        f"FROM {base_image}",
        "ENV DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1 "
        "PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore",
        *ca_setup_lines(ca_bundle),
        *_base_tools(),
    ]
    if given:
        lines.append(f"COPY {' '.join(given)} {LISTS_DIR}/")
    if apt:
        lines.append(
            f"RUN apt-get update && xargs -a {LISTS_DIR}/{APT_LIST} apt-get install -y --no-install-recommends"
            " && rm -rf /var/lib/apt/lists/*"
        )
    if pip:
        lines.append(
            f"RUN uv pip install --system --break-system-packages --no-cache -r {LISTS_DIR}/{PIP_LIST}"
        )
    lines.append("WORKDIR /app")
    return Recipe("\n".join(lines) + "\n", tuple((name, _list_file(e)) for name, e in given.items()))


def generate_dockerfile(
    base_image: str,
    apt_packages: Sequence[str] = (),
    pip_packages: Sequence[str] = (),
    ca_bundle: bool = False,
) -> str:
    """The generated recipe's Dockerfile text alone. Raises InputError."""
    return generate_recipe(base_image, apt_packages, pip_packages, ca_bundle).dockerfile


def recipe_hash(dockerfile: str, ca_bytes: bytes | None, files: Iterable[tuple[str, bytes]] = ()) -> str:
    """16 hex digits of sha256 over everything that goes into a build."""
    digest = hashlib.sha256(dockerfile.encode())
    if ca_bytes:
        digest.update(b"\0pier-ca\0" + ca_bytes)
    for name, content in files:
        digest.update(b"\0file\0" + name.encode() + b"\0" + hashlib.sha256(content).digest())
    return digest.hexdigest()[:16]


def recipe_tag(
    name: str, dockerfile: str, ca_bytes: bytes | None, files: Iterable[tuple[str, bytes]] = ()
) -> str:
    """The image tag a Dockerfile builds to: same content, same tag, so a build is
    found and reused instead of repeated."""
    repo = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._") or "generated"
    return f"{BUILD_REPO}/{repo}:{recipe_hash(dockerfile, ca_bytes, files)}"


def read_ca_bundle(path: Path | None) -> bytes | None:
    """The configured CA bundle's bytes, or None when there is none.
    Raises InputError when one is configured but cannot be read."""
    if path is None:
        return None
    try:
        return path.read_bytes()
    except OSError as exc:
        raise InputError(
            f"CA bundle {path} cannot be read ({exc.strerror}): fix PIER_CA_BUNDLE or unset it"
        ) from exc
