#!/usr/bin/env bash
# Installs what --env-config=sc2 and --env-config=sc2v2 need, beside this project and without
# changing the version of any package already installed (protobuf above all: SMAC and SMACv2 pin
# protobuf<3.21, which breaks TensorBoard and W&B if pip obeys it).
#
#   bash install_sc2.sh                   # StarCraft II 4.10, the maps, SMAC and SMACv2 (Linux)
#   SC2PATH=/opt/StarCraftII bash install_sc2.sh
#   SMAC_SRC=/src/smac SMACV2_SRC=/src/smacv2.tar.gz bash install_sc2.sh   # no internet for git
#   bash install_sc2.sh --packages-only   # SMAC, SMACv2 and PySC2 only: no game, no maps (what
#                                         # SMAC's own code needs to referee skirmish's, in tests)
#   bash install_sc2.sh --stand-in        # no game: the SC2 API stand-in on skirmish's physics at
#                                         # $SC2PATH/Versions/Base75689/SC2_x64, and the maps
#
# SC2PATH     the game's folder (default ~/StarCraftII); left alone when it holds a game (Versions/)
# SMAC_SRC    where SMAC comes from: a git URL (default), a local folder or an archive
# SMACV2_SRC  the same for SMACv2
# SC2_MAPS    the SMAC/SMACv2 maps: a zip or a folder of .SC2Map files (default: SMACv2's release)
# PYTHON      the interpreter whose environment gets the packages (default: python)
#
# How: SMAC, SMACv2, PySC2 and s2clientprotocol are installed without their declared dependencies,
# then those dependencies by name, constrained to the versions already installed. PySC2's protobuf
# files predate protobuf 4; the project's sc2 wrappers select protobuf's pure-Python runtime for
# them (PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=python) unless you set it yourself. The PyPI package
# named `smac` is SMAC3, a hyperparameter optimiser, not the StarCraft Multi-Agent Challenge.
# By downloading StarCraft II you accept Blizzard's AI and Machine Learning License
# (https://blzdistsc2-a.akamaihd.net/AI_AND_MACHINE_LEARNING_LICENSE.html).
set -euo pipefail

SC2PATH=${SC2PATH:-$HOME/StarCraftII}
SMAC_SRC=${SMAC_SRC:-git+https://github.com/oxwhirl/smac.git}
SMACV2_SRC=${SMACV2_SRC:-git+https://github.com/oxwhirl/smacv2.git}
SC2_MAPS=${SC2_MAPS:-https://github.com/oxwhirl/smacv2/releases/download/maps/SMAC_Maps.zip}
python=${PYTHON:-python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

packages_only=0
stand_in=0
for arg in "$@"; do
  case "$arg" in
    --packages-only) packages_only=1 ;;
    --stand-in) stand_in=1 ;;
    *) echo "install_sc2.sh: unknown option '$arg' (valid: --packages-only, --stand-in)" >&2; exit 2 ;;
  esac
done

# --- the game ---------------------------------------------------------------------------------
if [ "$packages_only" = 1 ]; then
  echo "--packages-only: no game, no maps"
elif [ "$stand_in" = 1 ]; then
  if [ -d "$SC2PATH/Versions" ] && ! grep -qs "stand-in" "$SC2PATH"/Versions/Base*/SC2_x64; then
    echo "install_sc2.sh: $SC2PATH holds StarCraft II; choose another SC2PATH for the stand-in" >&2
    exit 2
  fi
elif [ -d "$SC2PATH/Versions" ]; then
  echo "StarCraft II already at $SC2PATH: left alone"
else
  echo "downloading StarCraft II 4.10 (about 4 GB) into $SC2PATH ..."
  curl -fL -o "$tmp/SC2.4.10.zip" http://blzdistsc2-a.akamaihd.net/Linux/SC2.4.10.zip
  mkdir -p "$(dirname "$SC2PATH")"
  unzip -q -P iagreetotheeula "$tmp/SC2.4.10.zip" -d "$tmp"
  mv "$tmp/StarCraftII" "$SC2PATH"
fi

# --- the maps (SMACv2's pack holds every SMAC v1 map and 32x32_flat) ----------------------------
maps="$SC2PATH/Maps/SMAC_Maps"
if [ "$packages_only" = 1 ] || [ "$stand_in" = 1 ]; then
  :  # the stand-in writes its own (below)
elif [ -f "$maps/32x32_flat.SC2Map" ] && [ -f "$maps/3m.SC2Map" ]; then
  echo "SMAC and SMACv2 maps already in $maps"
else
  mkdir -p "$maps" "$tmp/maps"
  if [ -d "$SC2_MAPS" ]; then
    cp "$SC2_MAPS"/*.SC2Map "$tmp/maps/"
  else
    if [ -f "$SC2_MAPS" ]; then cp "$SC2_MAPS" "$tmp/maps.zip"; else curl -fL -o "$tmp/maps.zip" "$SC2_MAPS"; fi
    unzip -qo "$tmp/maps.zip" -d "$tmp/maps"
  fi
  find "$tmp/maps" -name '*.SC2Map' -exec cp -f {} "$maps/" \;
  echo "maps installed in $maps"
fi

# --- the packages -------------------------------------------------------------------------------
# What the `smac` module is, by the files of the distribution that provides it (not by whether
# its import happens to work): smac (the StarCraft Multi-Agent Challenge), smac3, or none.
which_smac() {
  "$python" - <<'PY'
import importlib.metadata as md
names = md.packages_distributions().get("smac", [])
kind = "none"
for name in names:
    files = [str(f) for f in (md.files(name) or [])]
    kind = "smac" if any(f.endswith("smac/env/starcraft2/starcraft2.py") for f in files) else "smac3"
print(kind)
PY
}
case "$(which_smac)" in
  smac3)
    echo "removing SMAC3 (the PyPI package named smac), which takes the StarCraft Multi-Agent Challenge's module name"
    "$python" -m pip uninstall -y smac ;;
  smac) echo "SMAC (StarCraft Multi-Agent Challenge) found: reinstalling it from $SMAC_SRC" ;;
esac

# every package installed now keeps its version
"$python" -m pip list --format=freeze 2>/dev/null \
  | grep -viE '^(smac|smacv2|pysc2|s2clientprotocol)==' > "$tmp/keep.txt" || true
"$python" -m pip install --no-deps "$SMAC_SRC" "$SMACV2_SRC" "pysc2==4.0.0" "s2clientprotocol==4.10.1.75800.0"
# SMAC's and PySC2's other dependencies (enum34 is left out: Python 3 has enum, and enum34 would
# shadow it); protobuf, numpy and the rest stay as they are
"$python" -m pip install -c "$tmp/keep.txt" absl-py deepdiff dm-env-rpc mock mpyq portpicker s2protocol \
  sk-video websocket-client

PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION=${PROTOCOL_BUFFERS_PYTHON_IMPLEMENTATION:-python} \
  "$python" -c "import smac.env, smacv2.env; from s2clientprotocol import sc2api_pb2" \
  && echo "SMAC and SMACv2 import"

if [ "$stand_in" = 1 ]; then
  here=$(cd "$(dirname "$0")" && pwd)
  # map files: SMACv2's own where SC2_MAPS names a folder of them, else empty ones (the stand-in
  # picks the map by name)
  maps_from=""
  [ -d "$SC2_MAPS" ] && maps_from="$SC2_MAPS"
  PYTHONPATH="$here/src" "$python" -m envs.skirmish.standin install "$SC2PATH" $maps_from >/dev/null
  echo "the SC2 API stand-in (skirmish's physics, not StarCraft II) is at $SC2PATH/Versions/Base75689/SC2_x64"
fi

echo "done. Use it with: export SC2PATH=$SC2PATH; python src/main.py --config=qmix --env-config=sc2 with env_args.map_name=3m
  (SMACv2: --env-config=sc2v2 with env_args.scenario=protoss_5_vs_5)"
