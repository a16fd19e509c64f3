# Python 3.12 as the snapshot's python3, whatever the base's own Python: the
# base's python3.12 if it has one, else the distribution's python3.12 package
# (Ubuntu 24.04, Debian releases that carry it), else uv's build from the
# python-build-standalone mirror in PIER_PYTHON_INSTALL_MIRROR. When none
# answers, the build says so in a warning and python3 stays the base's: the
# facts step below records what python3 is, and `pier snapshot list` shows it.
RUN set -u; want=3.12; mirror='{{python_mirror}}'; \
    minor() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }; \
    py=""; how=""; \
    if [ "$(minor python3)" = "$want" ]; then py=$(command -v python3); how="the base image's python3"; \
    elif command -v python$want >/dev/null; then py=$(command -v python$want); how="the base image's python$want"; \
    elif command -v apt-get >/dev/null && apt-get update -qq >/dev/null 2>&1 \
         && apt-get install -y -qq --no-install-recommends python$want python$want-venv >/dev/null 2>&1; then \
      py=/usr/bin/python$want; how="the distribution's python$want package"; \
    elif [ -n "$mirror" ] && UV_PYTHON_INSTALL_MIRROR="$mirror" UV_PYTHON_INSTALL_DIR=/opt/pier-python uv python install -q $want; then \
      py=$(UV_PYTHON_INSTALL_DIR=/opt/pier-python uv python find --managed-python $want); how="uv's build from $mirror"; \
    fi; \
    rm -rf /var/lib/apt/lists/*; \
    if [ -n "$py" ]; then \
      ln -sf "$py" /usr/local/bin/python3; ln -sf "$py" /usr/local/bin/python; ln -sf "$py" /usr/local/bin/python$want; hash -r; \
      python3 -m pip --version >/dev/null 2>&1 || uv pip install -q --system --break-system-packages --python /usr/local/bin/python3 pip; \
      echo "pier: python3 is $(python3 --version 2>&1), from $how"; \
    else \
      echo "pier: WARNING: this snapshot's recipe asks for Python $want but none was found: the base image's python3 is $(python3 --version 2>&1), its package manager has no python$want, and no python-build-standalone mirror is set (PIER_PYTHON_INSTALL_MIRROR). python3 stays $(python3 --version 2>&1). Set PIER_PYTHON_INSTALL_MIRROR, or give a base with Python $want (PIER_SNAPSHOT_BASE_IMAGE)."; \
    fi
