"""Runbook secrets as placeholders: the schema (errors name the field), the plan
(placeholders in the sandbox's environment and instruction, the secret's hosts
in the allow-list, no injection without one) and the header substitution."""

from __future__ import annotations

import base64

import pytest

from pier.egress import allow_list
from pier.egress.inject import PLACEHOLDER_PREFIX, LiveInjection, declared_injections, substitute_headers
from pier.errors import InputError
from pier.lifecycle.plan import RunInputs, build_plan, secret_variable
from pier.runbook import parse
from pier.settings import Settings
from pier.tasks import resolve, task_from_runbook

TOKEN = "ghp_realvalue1234567890"
INJECTED = 'secrets: {GITHUB_TOKEN: {env: GH_TOKEN, inject: header, hosts: ["api.github.com"]}}'


def plan_of(front: str, env: dict[str, str] | None = None, body: str = "Do it.", **settings):
    step = resolve(task_from_runbook(parse(f"---\nagent: script\n{front}\n---\n{body}\n")))
    return build_plan(step, RunInputs("run-1", "c", "t", env or {}), Settings(**settings))


def injections(decls: dict):
    return declared_injections(decls, secret_variable)


def test_a_marked_secret_gets_a_random_placeholder_and_its_hosts():
    (one,) = injections(
        {"GITHUB_TOKEN": {"env": "GH_TOKEN", "inject": "header", "hosts": ["api.github.com"]}}
    )
    (two,) = injections(
        {"GITHUB_TOKEN": {"inject": "header", "hosts": ["api.github.com", "*.github.com:8443"]}}
    )
    assert one.variable == "GH_TOKEN" and two.variable == "GITHUB_TOKEN"
    assert one.placeholder.startswith(PLACEHOLDER_PREFIX) and one.placeholder != two.placeholder
    assert one.hosts == ("api.github.com",) and two.rules.rule_for("x.github.com", 8443) is not None
    assert injections({"PLAIN": {"env": "PLAIN", "required": True}}) == ()


@pytest.mark.parametrize(
    ("decl", "message"),
    [
        ({"inject": "header"}, r"secrets\.S\.hosts: a secret with `inject: header` needs the hosts"),
        ({"inject": "header", "hosts": []}, r"secrets\.S\.hosts: .* needs the hosts"),
        ({"hosts": ["api.github.com"]}, r"secrets\.S\.hosts: only a secret with `inject: header` has hosts"),
        ({"inject": "body", "hosts": ["a.org"]}, r"secrets\.S\.inject: Input should be 'header'"),
        ({"inject": "header", "hosts": "a.org"}, r"secrets\.S\.hosts: Input should be a valid list"),
        (
            {"inject": "header", "hosts": ["http://a.org"]},
            r"secrets\.S\.hosts: 'http://a.org' has no valid port",
        ),
    ],
)
def test_bad_declarations_are_named(decl, message):
    with pytest.raises(InputError, match=message):
        injections({"S": decl})


def test_injection_needs_an_allow_list_and_adds_its_hosts_to_it():
    with pytest.raises(InputError, match=r"secrets\.GITHUB_TOKEN\.inject: .*add `network: \{allow: \[\]\}`"):
        plan_of(INJECTED)
    plan = plan_of(INJECTED + "\nnetwork: {allow: [pypi.org]}")
    assert plan.network_allow == ("pypi.org", "api.github.com")
    assert plan_of(INJECTED, network_allow="pypi.org").network_allow == ("pypi.org", "api.github.com")
    off = plan_of(INJECTED + "\nnetwork_enabled: false")  # no network: nothing to put in, nothing refused
    assert off.network_allow is None and off.sandbox_env({"GH_TOKEN": TOKEN}) == {
        "GH_TOKEN": off.injections[0].placeholder
    }


def test_the_sandbox_and_the_instruction_get_the_placeholder_never_the_value():
    env = {"GH_TOKEN": TOKEN, "OTHER": "kept"}
    plan = plan_of(
        INJECTED + "\nnetwork: {allow: []}", env, body="Use {{secrets.GITHUB_TOKEN}} as the bearer token."
    )
    (injection,) = plan.injections
    assert TOKEN not in plan.instruction and injection.placeholder in plan.instruction
    assert plan.sandbox_env(env) == {"GH_TOKEN": injection.placeholder, "OTHER": "kept"}
    assert TOKEN in plan.secret_values  # masked in logs like any secret
    plain = plan_of("secrets: {GH: {env: GH_TOKEN}}", env, body="Use {{secrets.GH}}.")
    assert TOKEN in plain.instruction and plain.sandbox_env(env) == env  # without inject: as before


def live_injection(placeholder: str = "pier-secret-abc") -> LiveInjection:
    return LiveInjection(placeholder, TOKEN, allow_list(["api.github.com"]))


def test_headers_get_the_value_where_the_placeholder_is():
    headers = [
        (b"host", b"api.github.com"),
        (b"authorization", b"Bearer pier-secret-abc"),
        (b"x-api-key", b"pier-secret-abc"),
        (b"user-agent", b"curl"),
    ]
    out, changed = substitute_headers(headers, [live_injection()])
    assert changed == 2
    assert out == [
        (b"host", b"api.github.com"),
        (b"authorization", b"Bearer " + TOKEN.encode()),
        (b"x-api-key", TOKEN.encode()),
        (b"user-agent", b"curl"),
    ]


def test_a_basic_credential_gets_the_value_inside_its_base64():
    basic = b"Basic " + base64.b64encode(b"x-access-token:pier-secret-abc")
    (out, changed) = substitute_headers([(b"Authorization", basic)], [live_injection()])
    assert changed == 1
    assert base64.b64decode(out[0][1].split()[1]) == b"x-access-token:" + TOKEN.encode()
    unrelated = b"Basic " + base64.b64encode(b"user:password")
    assert substitute_headers([(b"authorization", unrelated)], [live_injection()]) == (
        [(b"authorization", unrelated)],
        0,
    )


def test_without_an_injection_for_the_host_nothing_changes():
    headers = [(b"authorization", b"Bearer pier-secret-abc")]
    assert substitute_headers(headers, []) == (headers, 0)
    assert live_injection().applies_to("api.github.com", 443)
    assert not live_injection().applies_to("evil.example", 443)
    assert not live_injection().applies_to("api.github.com", 8443)


def test_a_secrets_hosts_on_this_machine_are_refused_like_allow_list_entries():
    """inject.hosts join the allow-list, so a loopback host there is refused where given."""
    from pier.outbound import OutboundRefused

    front = 'secrets: {T: {env: T, inject: header, hosts: ["127.0.0.1:8080"]}}\nnetwork: {allow: []}'
    with pytest.raises(OutboundRefused, match=r"secrets.inject.hosts: '127.0.0.1:8080' is not an allowed"):
        plan_of(front, {"T": "v" * 12})
