# What the image has, read from it: /etc/pier/snapshot.json (pier reads it
# after a build, for `pier snapshot list` and the build's own warnings).
RUN set -u; mkdir -p /etc/pier; \
    v() { out=$(sh -c "$2" 2>/dev/null | head -1 | tr -d '"\\'); printf '  "%s": "%s",\n' "$1" "$out"; }; \
    { echo "{"; \
      v python3 'python3 -c "import platform; print(platform.python_version())"'; \
      v node 'node --version | sed s/^v//'; v npm 'npm --version'; v uv 'uv --version | cut -d" " -f2'; \
      v gcc 'gcc -dumpfullversion'; v gfortran 'gfortran -dumpfullversion'; \
      v git 'git --version | cut -d" " -f3'; v curl 'curl --version | cut -d" " -f2'; \
      v chromium 'chromium --version 2>/dev/null | cut -d" " -f2'; \
      v playwright 'python3 -c "import importlib.metadata as m; print(m.version(\"playwright\"))"'; \
      v playwright-mcp 'npm ls -g @playwright/mcp --depth=0 | sed -n "s/.*@playwright\/mcp@//p"'; \
{{agent_facts}}
      printf '  "built": "%s"\n}\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"; \
    } > /etc/pier/snapshot.json; cat /etc/pier/snapshot.json
