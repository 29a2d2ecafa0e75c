"""Play a replay buffer's log (components/replay_log.py) again: each stored episode on its own, in
a fresh env built as the run's, with the logged actions."""

from __future__ import annotations

from types import SimpleNamespace

from components.replay_log import LOG, agent_fields, digest, read_log
from runners.episode_runner import EpisodeRunner
from utils.errors import first_line


class _ScriptedController:
    """Plays the logged episode: the stored actions, step by step, and the stored draws."""

    action_selector = None

    def __init__(self, mac, fields, action_shape):
        self.mac, self.fields, self.action_shape, self.i = mac, fields, action_shape, 0

    def init_hidden(self, batch_size):
        pass

    def episode_data(self):
        return {k: v[self.i : self.i + 1] for k, v in self.fields.items() if k != "actions"}

    def select_actions(self, batch, t_ep, t_env, bs=slice(None), test_mode=False):
        return self.fields["actions"][self.i, t_ep].reshape(1, *self.action_shape)

    def env_actions(self, actions, batch, t, bs):
        return self.mac.env_actions(actions, batch, t, bs)


class _Silent:
    def log_stat(self, *args, **kwargs):
        pass


def rebuild(folder, buffer, args, runner):
    """Fill `buffer` by playing again the episodes that the step folder's log keeps, in a fresh
    env built as the run's. -> None when it worked, else why not (the buffer is then left empty)."""
    log = read_log(folder)
    if log is None:
        return f"the checkpoint keeps neither buffer.th nor {LOG}"
    meta, fields = log
    if meta["buffer_size"] != buffer.buffer_size:
        have, want = meta["buffer_size"], buffer.buffer_size
        return f"its log is of a buffer of buffer_size={have}, this run's is {want}"
    steps, consts = agent_fields(buffer)
    if sorted(fields) != sorted(steps + consts):
        return f"its log keeps fields {sorted(fields)}, this run's controller writes {sorted(steps + consts)}"
    vshape = buffer.scheme["actions"]["vshape"]
    n_agents = buffer.steps["actions"].shape[1]
    action_shape = (n_agents,) if tuple(vshape) == (1,) else (n_agents, *vshape)
    scheme, groups = runner.batch_scheme, runner.batch_groups
    player = EpisodeRunner(SimpleNamespace(**{**vars(args), "device": "cpu"}), _Silent())
    scripted = _ScriptedController(runner.mac, fields, action_shape)
    player.setup(scheme, groups, buffer.preprocess, scripted)
    why = None
    try:
        buffer.clear()
        # oldest first, each to its slot, so that the rows lie as the run's did
        for i in buffer.age_order(meta["episodes_in_buffer"], meta["buffer_index"]):
            scripted.i = i
            player.env.set_rng_state(meta["env_rng"][i])
            buffer.refill(i, player.run(test_mode=False))
        buffer.buffer_index = meta["buffer_index"]
        if "priorities" in meta and hasattr(buffer, "restore_priorities"):
            buffer.restore_priorities(meta["priorities"], meta["max_priority"])
        if digest(buffer) != meta["digest"]:
            why = "the episodes played again differ from the saved ones"
    except Exception as e:  # a log this run cannot play: the run goes on as without one
        why = f"playing it again failed: {first_line(e)}"
    finally:
        player.close_env()
    if why is not None:
        buffer.clear()
    return why
