# Node 22 + npm from the npm registry (Debian bookworm ships Node 18 and the
# nodejs.org downloads are not always reachable); versions and checksums pinned.
RUN set -eu; \
    node_version=22.23.5; npm_version=10.9.9; \
    case "$(dpkg --print-architecture)" in \
      amd64) arch=x64; sum=de3842fb07285b1299c5c46a176b144a5d1cf47117167babfe7b883f1e8ee8258a5748ce516426ec7b70e52b97aaa94c084862d1c26ac9b14f11be6185c06233 ;; \
      arm64) arch=arm64; sum=7b52ce506295aee3c6b8b56eb67f3e0a09b9a48d403e6e0abe1fb36dbfea7bf6690fdb3e4d06f2e6252064e5a63e96d22a98f44ddf033f53743449d76ac1e2ce ;; \
      *) echo "no Node build for $(dpkg --print-architecture)" >&2; exit 1 ;; \
    esac; \
    curl -fsSL "https://registry.npmjs.org/node-linux-$arch/-/node-linux-$arch-$node_version.tgz" -o /tmp/node.tgz; \
    echo "$sum  /tmp/node.tgz" | sha512sum -c -; \
    tar -xzf /tmp/node.tgz -C /usr/local --strip-components=1 package/bin package/include package/share; \
    curl -fsSL "https://registry.npmjs.org/npm/-/npm-$npm_version.tgz" -o /tmp/npm.tgz; \
    echo "d60fba8cb42f688b81e33c2f1cbef2ad7b977166700ec0ad057f1b6d60ea6ef2524abf673e20c35931cd8305d1dbb8887134d6eefdc0e7b8435bd458bf65b862  /tmp/npm.tgz" | sha512sum -c -; \
    mkdir -p /usr/local/lib/node_modules/npm; \
    tar -xzf /tmp/npm.tgz -C /usr/local/lib/node_modules/npm --strip-components=1; \
    ln -sf ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm; \
    ln -sf ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx; \
    rm -f /tmp/node.tgz /tmp/npm.tgz; \
    node --version; npm --version
ENV NPM_CONFIG_UPDATE_NOTIFIER=false NPM_CONFIG_FUND=false
