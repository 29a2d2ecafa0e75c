"""A game that never answers: it accepts PySC2's WebSocket and then says nothing (a hung StarCraft
II). tests/test_sc2_standin.py launches it as SC2_x64."""

import sys
import time

from utils.websocket_server import serve

port = int(sys.argv[sys.argv.index("-port") + 1])
serve("127.0.0.1", port, "/sc2api", lambda message: time.sleep(3600))
