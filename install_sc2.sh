#!/usr/bin/env bash
# Installs what --env-config=sc2 and --env-config=sc2v2 need (Linux, needs internet): StarCraft II
# 4.10 into $SC2PATH (default ~/StarCraftII), the SMACv2 maps (every SMAC v1 map plus 32x32_flat),
# and SMAC and SMACv2 from their git repositories (the PyPI package named `smac` is SMAC3, a
# different project). By downloading StarCraft II you accept Blizzard's
# AI and Machine Learning License (https://blzdistsc2-a.akamaihd.net/AI_AND_MACHINE_LEARNING_LICENSE.html).
set -euo pipefail

SC2PATH=${SC2PATH:-$HOME/StarCraftII}
python=${PYTHON:-python}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ -d "$SC2PATH/Versions" ]; then
  echo "StarCraft II already at $SC2PATH"
else
  echo "downloading StarCraft II 4.10 (about 4 GB) ..."
  curl -fL -o "$tmp/SC2.4.10.zip" http://blzdistsc2-a.akamaihd.net/Linux/SC2.4.10.zip
  mkdir -p "$(dirname "$SC2PATH")"
  unzip -q -P iagreetotheeula "$tmp/SC2.4.10.zip" -d "$tmp"
  mv "$tmp/StarCraftII" "$SC2PATH"
fi

mkdir -p "$SC2PATH/Maps"
if [ -f "$SC2PATH/Maps/SMAC_Maps/32x32_flat.SC2Map" ]; then
  echo "SMAC and SMACv2 maps already installed"
else
  # SMACv2's map pack holds all SMAC v1 maps too
  curl -fL -o "$tmp/SMAC_Maps.zip" https://github.com/oxwhirl/smacv2/releases/download/maps/SMAC_Maps.zip
  unzip -qo "$tmp/SMAC_Maps.zip" -d "$tmp/maps"
  mkdir -p "$SC2PATH/Maps/SMAC_Maps"
  find "$tmp/maps" -name '*.SC2Map' -exec mv -f {} "$SC2PATH/Maps/SMAC_Maps/" \;
fi

if "$python" -c "import smac.env" 2>/dev/null; then
  echo "SMAC already installed"
else
  if "$python" -c "import smac" 2>/dev/null; then
    echo "removing the PyPI package smac (SMAC3), which shadows the StarCraft Multi-Agent Challenge"
    "$python" -m pip uninstall -y smac
  fi
  "$python" -m pip install "git+https://github.com/oxwhirl/smac.git"
fi

if "$python" -c "import smacv2.env" 2>/dev/null; then
  echo "SMACv2 already installed"
else
  "$python" -m pip install "git+https://github.com/oxwhirl/smacv2.git"
fi

echo "done. Use it with: export SC2PATH=$SC2PATH; python src/main.py --config=qmix --env-config=sc2 with env_args.map_name=3m
  (SMACv2: --env-config=sc2v2 with env_args.scenario=protoss_5_vs_5)"
