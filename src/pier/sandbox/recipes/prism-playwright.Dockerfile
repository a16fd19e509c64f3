# pier built-in snapshot prism-playwright: built around Playwright and Chromium
# for browser-heavy work: Debian's Chromium and chromedriver, fonts for faithful
# rendering (Latin, CJK, emoji), Xvfb for headed sessions, the Playwright Python
# library (its default launch() finds the browser) and MCP server, Node 22 +
# npm, Python 3.12 with pip and uv, git, curl, and the agent CLIs at pier's
# pinned versions. Each `# pier-step:` line names the layer below it.
FROM {{base_image}}
ENV DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
{{ca_setup}}
# pier-step: system packages (git, curl, Chromium, chromedriver, Xvfb, fonts)
# libatomic1: the Node that the Playwright Python library runs its driver on needs it.
RUN apt-get update && apt-get install -y --no-install-recommends \
      git curl ca-certificates xz-utils unzip procps \
      chromium chromium-driver xvfb xauth libatomic1 \
      fonts-liberation fonts-noto-core fonts-noto-cjk fonts-noto-color-emoji \
 && (command -v python3 >/dev/null || apt-get install -y --no-install-recommends python3) \
 && rm -rf /var/lib/apt/lists/*
# pier-step: uv {{uv_version}}
{{uv_install}}
# pier-step: Python 3.12 as python3
{{python312}}
# pier-step: Node 22 + npm
{{node_install}}
# pier-step: Playwright for Python on Chromium
{{playwright_chromium}}
# pier-step: the Playwright MCP server
{{playwright_mcp}}
{{agent_clis}}
# pier-step: what the image has, read from it (/etc/pier/snapshot.json)
{{facts}}
WORKDIR /app
