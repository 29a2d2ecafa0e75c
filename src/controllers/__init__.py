from utils.registry import Registry

from .basic_controller import BasicMAC

REGISTRY = Registry("mac", {"basic_mac": BasicMAC})
