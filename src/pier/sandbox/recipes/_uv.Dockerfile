# uv from its PyPI wheel (no pip, no ensurepip, no GitHub download needed):
# the wheel's own uv binary, version and checksums pinned (dockerfile.UV_VERSION).
RUN set -eu; \
    uv_version=0.13.9; \
    if uv --version 2>/dev/null | grep -q "^uv $uv_version\( \|$\)"; then echo "pier: uv $uv_version is there"; exit 0; fi; \
    case "$(uname -m)" in \
      x86_64) url=https://files.pythonhosted.org/packages/3d/aa/26d64642d808de4a652579ef950d7cd2d37f080a8babf9c67c6b75fc4c3f/uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl; sum=d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19 ;; \
      aarch64) url=https://files.pythonhosted.org/packages/fe/2f/51a5de367c602592c018a42a23d57fba5f2689fe6c3bf025dcf043b39c61/uv-0.13.9-py3-none-manylinux_2_28_aarch64.whl; sum=ecb6028d79dc96fbeafffe5c8af62a7099487ebc05a701e76714eebcffd06375 ;; \
      *) echo "pier: no uv wheel for $(uname -m)" >&2; exit 1 ;; \
    esac; \
    command -v curl >/dev/null || { echo "pier: uv needs curl to be fetched; the image has none" >&2; exit 1; }; \
    curl -fsSL "$url" -o /tmp/pier-uv.whl; \
    echo "$sum  /tmp/pier-uv.whl" | sha256sum -c - >/dev/null; \
    rm -rf /tmp/pier-uv; mkdir -p /tmp/pier-uv; \
    if command -v unzip >/dev/null; then unzip -q /tmp/pier-uv.whl -d /tmp/pier-uv; \
    elif command -v python3 >/dev/null; then python3 -m zipfile -e /tmp/pier-uv.whl /tmp/pier-uv; \
    else echo "pier: uv's wheel needs unzip or python3 to be unpacked; the image has neither" >&2; exit 1; fi; \
    install -m 0755 /tmp/pier-uv/uv-$uv_version.data/scripts/uv /usr/local/bin/uv; \
    install -m 0755 /tmp/pier-uv/uv-$uv_version.data/scripts/uvx /usr/local/bin/uvx; \
    rm -rf /tmp/pier-uv /tmp/pier-uv.whl; \
    uv --version
