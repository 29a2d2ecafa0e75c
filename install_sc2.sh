#!/usr/bin/env bash
# Installs what --env-config=sc2 needs (Linux, needs internet): StarCraft II 4.10 into $SC2PATH
# (default ~/StarCraftII), the SMAC maps, and SMAC itself from its git repository (the PyPI package
# named `smac` is SMAC3, a different project). By downloading StarCraft II you accept Blizzard's
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
if [ -d "$SC2PATH/Maps/SMAC_Maps" ]; then
  echo "SMAC maps already installed"
else
  curl -fL -o "$tmp/SMAC_Maps.zip" https://github.com/oxwhirl/smac/releases/download/v0.1-beta1/SMAC_Maps.zip
  unzip -q "$tmp/SMAC_Maps.zip" -d "$SC2PATH/Maps"
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

echo "done. Use it with: export SC2PATH=$SC2PATH; python src/main.py --config=qmix --env-config=sc2 with env_args.map_name=3m"
