# pier built-in snapshot python312-uv: Python 3.12 as python3 (whatever the
# base's own Python), pip, uv, a C and Fortran toolchain, Node 22 + npm, git,
# curl, Chromium with the Playwright Python library (its default launch() finds
# the browser) and the Playwright MCP server, and the agent CLIs at pier's
# pinned versions, so a run on it installs nothing. Each `# pier-step:` line
# names the layer below it in the build's progress.
FROM {{base_image}}
ENV DEBIAN_FRONTEND=noninteractive PIP_BREAK_SYSTEM_PACKAGES=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
{{ca_setup}}
# pier-step: system packages (git, curl, build-essential, gfortran, Chromium, fonts)
# libatomic1: the Node that the Playwright Python library runs its driver on needs it.
RUN apt-get update && apt-get install -y --no-install-recommends \
      git curl ca-certificates xz-utils unzip procps \
      build-essential gfortran pkg-config \
      chromium fonts-liberation libatomic1 \
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
