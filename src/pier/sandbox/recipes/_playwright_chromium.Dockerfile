# Playwright for Python with the distribution's Chromium, found by the default
# launch(): Playwright looks for its own builds under PLAYWRIGHT_BROWSERS_PATH
# (chromium-<rev>/..., chromium_headless_shell-<rev>/...), so each path it asks
# for is a link to /usr/bin/chromium. The paths are Playwright's own answer
# (its error names the one it wanted), and the step ends on a real screenshot.
ENV PLAYWRIGHT_BROWSERS_PATH=/ms-playwright PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 CHROME_BIN=/usr/bin/chromium
RUN set -eu; \
    uv pip install -q --system --break-system-packages --no-cache --python /usr/local/bin/python3 playwright==1.65.2 2>/dev/null \
      || uv pip install -q --system --break-system-packages --no-cache --python "$(command -v python3)" playwright==1.65.2; \
    link() { mkdir -p "$(dirname "$1")"; ln -sf /usr/bin/chromium "$1"; echo "pier: $1 -> /usr/bin/chromium"; }; \
    link "$(python3 -c 'from playwright.sync_api import sync_playwright as s; p = s().start(); print(p.chromium.executable_path); p.stop()')"; \
    shot='from playwright.sync_api import sync_playwright as s; p = s().start(); b = p.chromium.launch(); g = b.new_page(); g.set_content("<p>pier</p>"); g.screenshot(path="/tmp/pier-shot.png"); print("pier: Playwright default launch works: Chromium", b.version); b.close(); p.stop()'; \
    for attempt in 1 2 3 4; do \
      if out=$(python3 -c "$shot" 2>&1); then echo "$out"; break; fi; \
      want=$(printf '%s\n' "$out" | sed -n 's/.*Executable doesn.t exist at \([^ ]*\).*/\1/p' | head -1); \
      if [ -z "$want" ] || [ "$attempt" = 4 ]; then printf '%s\n' "$out" | tail -20; exit 1; fi; \
      link "$want"; \
    done; \
    rm -f /tmp/pier-shot.png
