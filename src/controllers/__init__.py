from utils.registry import Registry

from .ac_controller import ACMAC
from .basic_controller import BasicMAC
from .ices_controller import ICESMAC
from .maddpg_controller import MADDPGMAC

REGISTRY = Registry(
    "mac", {"basic_mac": BasicMAC, "maddpg_mac": MADDPGMAC, "ac_mac": ACMAC, "ices_mac": ICESMAC}
)
