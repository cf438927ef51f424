#!/usr/bin/env bash
# Installs umlab's build dependencies from Debian packages (Debian 12 and
# later). Installs only what is missing; needs root or sudo for that.
#   scripts/setup.sh          what the build needs
#   scripts/setup.sh --fuzz   also clang and libFuzzer, for scripts/fuzz.sh
#   scripts/setup.sh --report also headless chromium, for tests/report_render_test.sh
#                             (it skips without it; CI leaves it out for time)
set -euo pipefail

# parallel: GNU parallel, which `umlab sweep --run=local` and its test use;
# libyaml-cpp-dev: sweep grids in YAML; lld: the linker scripts/test.sh's
# sanitized builds use (faster than ld.bfd).
packages=(
  build-essential cmake ninja-build pkg-config git parallel lld
  libabsl-dev libgtest-dev libgmock-dev libbenchmark-dev libyaml-cpp-dev
  liburing-dev libzstd-dev nlohmann-json3-dev
  # The Python module (python/) and its tests; the build skips them without these.
  python3-dev pybind11-dev python3-pybind11 python3-numpy python3-pytest
)
case "${1:-}" in
  "") ;;
  # libclang-rt provides libclang_rt.fuzzer; libfuzzer-14-dev is not needed.
  --fuzz) packages+=(clang libclang-rt-14-dev) ;;
  --report) packages+=(chromium) ;;
  *)
    echo "setup: unknown option '$1'; use no option, --fuzz for the fuzzing tools or" \
      "--report for the browser that renders the HTML report in a test" >&2
    exit 2
    ;;
esac

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all dependencies are installed"
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if ! command -v sudo >/dev/null; then
    echo "setup: missing ${missing[*]}; run this script as root or install sudo" >&2
    exit 1
  fi
  sudo="sudo"
fi
echo "setup: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
