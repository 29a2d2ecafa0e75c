"""Cross-play: each team of a competitive env acts with the controller of its own checkpoint.

    evaluate=True team_checkpoints.good=<dir> team_checkpoints.adversary=<dir>

Each checkpoint's run may have used another algorithm: its controller is rebuilt from the config
saved with the checkpoint (networks, inputs, action form), on this run's env, by
assembly.build_team_mac."""

from __future__ import annotations


class TeamMAC:
    """Acts for every agent with its team's controller; the runner sees one controller."""

    def __init__(self, macs: dict[str, tuple]):
        self.macs = macs  # {team: (controller, agent indices)}
        self.action_selector = None  # no exploration schedule to log

    def init_hidden(self, batch_size: int) -> None:
        for mac, _ in self.macs.values():
            mac.init_hidden(batch_size)

    def episode_data(self) -> dict:
        return {}

    def select_actions(self, ep_batch, t_ep, t_env, bs=slice(None), test_mode=False):
        out = None
        for mac, members in self.macs.values():
            actions = mac.select_actions(ep_batch, t_ep=t_ep, t_env=t_env, bs=bs, test_mode=test_mode)
            if out is None:
                out = actions.clone()
            out[:, members] = actions[:, members]
        return out

    def env_actions(self, actions, ep_batch, t, bs):
        out = None
        for mac, members in self.macs.values():
            env_actions = mac.env_actions(actions, ep_batch, t, bs)
            if out is None:
                out = env_actions.clone()
            out[:, members] = env_actions[:, members]
        return out
