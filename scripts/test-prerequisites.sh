#!/usr/bin/env bash
# What the tests need beyond the Python packages of the test extra, made or checked before pytest runs (the README's
# test command runs this between its install and pytest; .ci/run runs that same command):
#
# - Azurite, the Azure Blob emulator of the storage tests: the npm package azurite, pinned, installed into
#   .test-tools/node/ of this checkout with the machine's Node.js (tests/support/emulators.py finds it there, or on
#   PATH). Where npm is missing, Debian's nodejs and npm are installed first (as root, with apt-get).
# - libfuse 2 and fusermount (Debian's libfuse2 and fuse), for the FUSE filesystem without hard links of
#   tests/storage/test_hard_links.py (fusepy loads libfuse 2; the mount needs root and /dev/fuse).
# - Chromium (Debian's chromium), which looks at report and matrix pages headless (tests/report/test_matrix_page.py).
#
# As root with apt-get, what is missing is installed. Otherwise each missing part is one line naming the command that
# installs it, and the script exits 1, before any test runs. What is there already is kept: a second run installs
# nothing and takes about a second.
set -uo pipefail
cd "$(dirname "$0")/.."

AZURITE_VERSION=3.37.0
TOOLS=.test-tools
missing=()

say() { echo "test-prerequisites: $*" >&2; }

can_apt() { [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; }

apt_updated=0
apt_install() {
  if [ "$apt_updated" -eq 0 ]; then
    apt-get update -qq >/dev/null 2>&1 || { say "apt-get update failed; check the machine's package sources"; return 1; }
    apt_updated=1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@" >/dev/null 2>&1
}

# Debian's packages: libfuse 2 with fusermount, Chromium, Node.js with npm (for Azurite).
packages=()
ldconfig -p 2>/dev/null | grep -q 'libfuse\.so\.2' || packages+=(libfuse2)
command -v fusermount >/dev/null || packages+=(fuse)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || packages+=(chromium)
azurite="$TOOLS/node/node_modules/.bin/azurite-blob"
if ! command -v npm >/dev/null && ! [ -x "$azurite" ]; then packages+=(nodejs npm); fi
if [ ${#packages[@]} -gt 0 ]; then
  if can_apt; then
    say "installing ${packages[*]} (apt-get)"
    apt_install "${packages[@]}" || missing+=("Debian's ${packages[*]}: apt-get install ${packages[*]} (as root)")
  else
    for package in "${packages[@]}"; do
      case "$package" in
        libfuse2|fuse) missing+=("$package (the FUSE tests): sudo apt-get install $package") ;;
        chromium) missing+=("chromium (the page tests look at pages headless): sudo apt-get install chromium") ;;
        nodejs|npm) missing+=("$package (Node.js 18 or later, to install Azurite): sudo apt-get install nodejs npm") ;;
      esac
    done
  fi
fi

# Azurite, pinned, into this checkout.
if ! { [ -x "$azurite" ] && [ "$(cat "$TOOLS/node/azurite.version" 2>/dev/null)" = "$AZURITE_VERSION" ]; }; then
  if command -v npm >/dev/null; then
    say "installing azurite@$AZURITE_VERSION into $TOOLS/node (npm)"
    if npm install --no-audit --no-fund --loglevel=error --prefix "$TOOLS/node" "azurite@$AZURITE_VERSION" \
        >/dev/null 2>&1 && [ -x "$azurite" ]; then
      echo "$AZURITE_VERSION" > "$TOOLS/node/azurite.version"
    else
      missing+=("azurite@$AZURITE_VERSION (the Azure emulator): npm install --prefix $TOOLS/node azurite@$AZURITE_VERSION failed; run it to see why")
    fi
  fi
fi

# The FUSE tests mount a filesystem: root and /dev/fuse.
[ -e /dev/fuse ] || missing+=("/dev/fuse (the FUSE tests mount a filesystem): run on a machine with it, or a container started with --device /dev/fuse --cap-add SYS_ADMIN")
[ "$(id -u)" -eq 0 ] || missing+=("root (the FUSE tests mount a filesystem as root): run the tests as root, or in a container")

if [ ${#missing[@]} -gt 0 ]; then
  for line in "${missing[@]}"; do say "missing $line"; done
  exit 1
fi
say "ok (azurite $AZURITE_VERSION in $TOOLS/node, libfuse 2, fusermount, chromium)"
