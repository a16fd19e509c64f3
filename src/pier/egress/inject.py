"""Runbook secrets as placeholders: the sandbox holds a per-run placeholder, and
pier's egress proxy puts the real value in the request headers sent to that
secret's hosts only. Pure: the schema, the placeholders and the substitution.

A runbook opts in per secret:

    secrets:
      GITHUB_TOKEN: {inject: header, hosts: ["api.github.com"]}

`hosts` is required (entries as in network.allow): no default could say where a
secret may go, and "every allowed host" would let an agent send it to any host
on the list whose requests someone else can read."""

from __future__ import annotations

import base64
import binascii
import secrets
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pier.egress.allow import AllowList, allow_list
from pier.errors import InputError

PLACEHOLDER_PREFIX = "pier-secret-"


class InjectDecl(BaseModel):
    """The injection part of a runbook secret."""

    model_config = ConfigDict(extra="ignore")

    inject: Literal["header"] | None = Field(
        None, description="header: the proxy puts the value in request headers to `hosts`"
    )
    hosts: list[str] | None = Field(None, description="where the value may go (network.allow entries)")


@dataclass(frozen=True)
class Injection:
    """One secret the proxy puts in: the variable the sandbox gets with `placeholder`
    in the value's place, and the hosts whose requests get the value. The value
    itself stays with pier (the run's environment), never in this plan."""

    name: str  # the runbook's secret name
    variable: str  # the environment variable that carries it
    placeholder: str
    hosts: tuple[str, ...]  # network.allow entries

    @property
    def rules(self) -> AllowList:
        return allow_list(self.hosts, f"secrets.{self.name}.hosts")


@dataclass(frozen=True)
class LiveInjection:
    """An injection with its value, as the egress proxy holds it for one run."""

    placeholder: str
    value: str
    hosts: AllowList

    def applies_to(self, host: str, port: int) -> bool:
        return self.hosts.rule_for(host, port) is not None


def new_placeholder() -> str:
    """Random per run and per secret: worthless outside the run, and unlike any
    value, so substitution replaces nothing else."""
    return PLACEHOLDER_PREFIX + secrets.token_hex(20)


def declared_injections(decls: Mapping[str, Any], variable_of: Any) -> tuple[Injection, ...]:
    """The runbook secrets marked `inject`, validated, each with a new placeholder.
    `variable_of(name, decl)` names the variable behind a secret. Raises InputError
    naming the field (secrets.NAME.inject, secrets.NAME.hosts)."""
    found = []
    for name, decl in decls.items():
        spec = _inject_decl(name, decl or {})
        if spec.inject is None:
            if spec.hosts is not None:
                raise InputError(
                    f"secrets.{name}.hosts: only a secret with `inject: header` has hosts "
                    "(add inject: header, or remove hosts)"
                )
            continue
        if not spec.hosts:
            raise InputError(
                f"secrets.{name}.hosts: a secret with `inject: header` needs the hosts its value may be "
                'sent to, e.g. hosts: ["api.github.com"] (there is no default)'
            )
        hosts = tuple(dict.fromkeys(str(h).strip() for h in spec.hosts))
        allow_list(hosts, f"secrets.{name}.hosts")  # refuses a bad entry now
        found.append(Injection(name, variable_of(name, decl), new_placeholder(), hosts))
    return tuple(found)


def _inject_decl(name: str, decl: Mapping[str, Any]) -> InjectDecl:
    try:
        return InjectDecl.model_validate(decl)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        hint = "inject takes header" if where.startswith("inject") else "hosts takes a list of host names"
        raise InputError(f"secrets.{name}.{where}: {first['msg']} ({hint})") from None


def live(injections: Iterable[Injection], env: Mapping[str, str]) -> tuple[LiveInjection, ...]:
    """The injections whose variable the run was given, with their values."""
    return tuple(
        LiveInjection(i.placeholder, env[i.variable], i.rules) for i in injections if env.get(i.variable)
    )


def substitute_headers(
    headers: Iterable[tuple[bytes, bytes]], injections: Iterable[LiveInjection]
) -> tuple[list[tuple[bytes, bytes]], int]:
    """The headers with each placeholder replaced by its value (also inside an
    `Authorization: Basic` credential, as git and curl -u send a token), and how
    many headers changed. The caller passes only the injections for the request's
    host."""
    pairs = [(i.placeholder.encode(), i.value.encode()) for i in injections]
    out, changed = [], 0
    for name, value in headers:
        new = _basic(value, pairs) if name.lower() == b"authorization" else None
        if new is None:
            new = value
            for placeholder, secret in pairs:
                new = new.replace(placeholder, secret)
        changed += new != value
        out.append((name, new))
    return out, changed


def _basic(value: bytes, pairs: list[tuple[bytes, bytes]]) -> bytes | None:
    """A Basic credential with placeholders replaced inside its base64, or None
    when the value is not a Basic credential holding one."""
    scheme, _, encoded = value.partition(b" ")
    if scheme.lower() != b"basic":
        return None
    try:
        decoded = base64.b64decode(encoded.strip(), validate=True)
    except (binascii.Error, ValueError):
        return None
    replaced = decoded
    for placeholder, secret in pairs:
        replaced = replaced.replace(placeholder, secret)
    if replaced == decoded:
        return None
    return scheme + b" " + base64.b64encode(replaced)
