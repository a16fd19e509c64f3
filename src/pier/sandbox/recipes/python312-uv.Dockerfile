# pier built-in snapshot python312-uv: Python 3.12 on Debian bookworm
# (from the base image), pip, uv, a C and Fortran toolchain, Node 22 + npm, git,
# curl, Chromium with the Playwright Python library and the Playwright MCP server.
# The agent CLIs are not baked in: pier's agent installer installs the pinned
# version at run time (and uses one already in the image when it matches), so
# their versions are pinned in one place only.
FROM {{base_image}}
ENV DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
{{ca_setup}}
# libatomic1: the Node that the Playwright Python library runs its driver on needs it.
RUN apt-get update && apt-get install -y --no-install-recommends \
      git curl ca-certificates xz-utils unzip procps \
      build-essential gfortran pkg-config \
      chromium fonts-liberation libatomic1 \
 && (command -v python3 >/dev/null || apt-get install -y --no-install-recommends python3 python3-pip python3-venv) \
 && rm -rf /var/lib/apt/lists/*
{{node_install}}
RUN python3 -m pip install --no-cache-dir uv=={{uv_version}} \
 && uv pip install --system --break-system-packages --no-cache playwright==1.65.2
# Playwright uses Debian's Chromium (launch with executable_path=$CHROME_BIN;
# the MCP server with --executable-path) instead of downloading its own build.
ENV PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 CHROME_BIN=/usr/bin/chromium
RUN npm install -g --no-fund --no-audit @playwright/mcp@0.0.83 && npm cache clean --force
WORKDIR /app
