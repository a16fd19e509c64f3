# The Playwright MCP server on the same Chromium; the agent CLIs are told of it
# through the image's pier.mcp_servers label (pier writes it into each CLI's
# own MCP configuration at run time, unless the runbook declares its own).
ENV PLAYWRIGHT_MCP_BROWSER=chromium PLAYWRIGHT_MCP_EXECUTABLE_PATH=/usr/bin/chromium PLAYWRIGHT_MCP_HEADLESS=true PLAYWRIGHT_MCP_NO_SANDBOX=true
RUN npm install -g --no-fund --no-audit --loglevel=error @playwright/mcp@0.0.83 && npm cache clean --force \
 && playwright-mcp --help >/dev/null && echo "pier: playwright-mcp $(npm ls -g @playwright/mcp --depth=0 | sed -n 's/.*@playwright\/mcp@//p')"
LABEL pier.mcp_servers="{\"playwright\": {\"command\": \"playwright-mcp\", \"args\": [\"--headless\", \"--browser\", \"chromium\", \"--executable-path\", \"/usr/bin/chromium\", \"--no-sandbox\", \"--isolated\"]}}"
