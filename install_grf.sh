#!/usr/bin/env bash
# Installs Google Research Football (gfootball 2.10.2) for --env-config=gfootball, into the
# current Python environment, without changing the version of any package already installed.
#
#   bash install_grf.sh                 # Debian/Ubuntu: apt packages, then an ~8 min compile
#   PYTHON=/path/to/venv/bin/python bash install_grf.sh
#
# What it does and why:
# - apt: SDL2 and Boost development files (the engine is C++ with a Boost.Python binding).
#   Skipped when they are all there; needs root (or sudo) otherwise.
# - gfootball is installed --no-deps: it declares `pygame`, which would overwrite mpe2's
#   `pygame-ce` in the same folder, and training never imports pygame. What it does import is
#   installed by name (absl-py, six, psutil, opencv-python-headless for cv2), constrained to the
#   versions already installed, so numpy, gym and protobuf stay as they are.
# - psutil and six go in before the build: its build script imports psutil, and gfootball
#   imports six without declaring it.
# - Boost.Python must match the interpreter's version (Debian 12 ships 3.11 only; Ubuntu 24.04
#   ships 3.12): the script stops before the compile when it does not.
set -euo pipefail

python=${PYTHON:-python}
version=2.10.2
die() { echo "install_grf.sh: $*" >&2; exit 1; }

command -v "$python" >/dev/null || die "no Python at '$python' (set PYTHON=/path/to/python)"
pyver=$("$python" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')

if "$python" -c "import gfootball_engine, gfootball.env" 2>/dev/null; then
  echo "gfootball already importable in $("$python" -c 'import sys; print(sys.prefix)'): nothing to do"
  exit 0
fi

# --- system packages ----------------------------------------------------------------------------
apt_pkgs="cmake g++ python${pyver}-dev libgl1-mesa-dev libegl1-mesa-dev libsdl2-dev libsdl2-image-dev
  libsdl2-ttf-dev libsdl2-gfx-dev libboost-thread-dev libboost-system-dev libboost-filesystem-dev
  libboost-python-dev"
missing=""
for p in $apt_pkgs; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
  command -v apt-get >/dev/null || die "apt-get not found; install these (or your system's equivalents) first:$missing"
  sudo=""
  if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null || die "need root or sudo to install:$missing"
    sudo="sudo"
  fi
  echo "installing system packages:$missing"
  $sudo apt-get update -qq
  # shellcheck disable=SC2086
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $missing >/dev/null \
    || die "apt-get could not install:$missing"
fi
command -v cmake >/dev/null || die "cmake not found after the apt step"
command -v g++ >/dev/null || die "g++ not found after the apt step"
tag=${pyver/./}
[ -n "$(find /usr/lib /usr/local/lib -name "libboost_python$tag.so" 2>/dev/null | head -1)" ] \
  || die "no Boost.Python for Python $pyver (libboost_python$tag.so); this system's are: $(find /usr/lib /usr/local/lib -name 'libboost_python3*.so' -printf '%f ' 2>/dev/null). Use a Python whose version has one."

# --- the Python packages --------------------------------------------------------------------------
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$python" -m pip list --format=freeze 2>/dev/null | grep -viE '^gfootball==' > "$tmp/keep.txt" || true
"$python" -m pip install -q -c "$tmp/keep.txt" psutil six absl-py opencv-python-headless

echo "building gfootball $version (about 8 minutes on 2 cores) ..."
# The build script calls `python3`: put this interpreter's folder first so it finds psutil.
bindir=$(dirname "$("$python" -c 'import sys; print(sys.executable)')")
PATH="$bindir:$PATH" "$python" -m pip install -q --no-deps --no-build-isolation \
  "gfootball==$version" > "$tmp/build.log" 2>&1 \
  || { tail -30 "$tmp/build.log" >&2; die "the gfootball build failed (its last lines are above)"; }

"$python" - <<'PY'
from gfootball.env import config, football_env
env = football_env.FootballEnv(config.Config({"level": "academy_3_vs_1_with_keeper",
                                              "players": ["agent:left_players=3"]}))
obs = env.reset()
obs, reward, done, info = env.step([0, 0, 0])
print(f"gfootball works: academy_3_vs_1_with_keeper gives {len(obs)} raw observations")
PY
"$python" -m pip check >/dev/null && echo "pip check: no broken requirements" \
  || "$python" -m pip check | grep -v '^gfootball' || true
echo "done. Use it with: python src/main.py --config=differ_vdn --env-config=gfootball with env_args.map_name=academy_3_vs_1_with_keeper"
