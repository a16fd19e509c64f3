# pier built-in snapshot prism-playwright: built around Playwright and
# Chromium for browser-heavy work: Debian's Chromium and chromedriver, fonts for
# faithful rendering (Latin, CJK, emoji), Xvfb for headed sessions, the Playwright
# Python library and MCP server, Node 22 + npm, Python with pip and uv, git, curl.
# As in python312-uv, the agent CLIs are installed at run time by pier.
FROM {{base_image}}
ENV DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
{{ca_setup}}
# libatomic1: the Node that the Playwright Python library runs its driver on needs it.
RUN apt-get update && apt-get install -y --no-install-recommends \
      git curl ca-certificates xz-utils unzip procps \
      chromium chromium-driver xvfb xauth libatomic1 \
      fonts-liberation fonts-noto-core fonts-noto-cjk fonts-noto-color-emoji \
 && (command -v python3 >/dev/null || apt-get install -y --no-install-recommends python3 python3-pip python3-venv) \
 && rm -rf /var/lib/apt/lists/*
{{node_install}}
RUN python3 -m pip install --no-cache-dir uv=={{uv_version}} \
 && uv pip install --system --break-system-packages --no-cache playwright==1.65.2
ENV PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 CHROME_BIN=/usr/bin/chromium
RUN npm install -g --no-fund --no-audit @playwright/mcp@0.0.83 && npm cache clean --force
WORKDIR /app
