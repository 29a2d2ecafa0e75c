"""A game that never answers: it accepts PySC2's WebSocket and then says nothing (a hung StarCraft
II). tests/test_sc2_standin.py launches it as SC2_x64."""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "src"))

from utils.websocket_server import serve  # noqa: E402

port = int(sys.argv[sys.argv.index("-port") + 1])
serve("127.0.0.1", port, "/sc2api", lambda message: time.sleep(3600))
