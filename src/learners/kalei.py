"""Kaleidoscope's learner side (modules/agents/kalei_agent.py holds the masks): the diversity
loss added to the TD loss with its coefficient rescaled every update, and the periodic reset of
the weights every mask prunes."""

from collections import deque
from statistics import mean

from utils.keys import declare_keys

declare_keys(
    "Kaleidoscope (agent kalei_rnn with learner q_learner)",
    (
        "kalei_div_coef",
        5.0,
        "float >= 0",
        "the diversity loss's coefficient before its rescaling: |div_coef * mean(TD loss) / "
        "mean(diversity loss)| over the last kalei_deque_len updates",
    ),
    ("kalei_deque_len", 100, "int >= 1", "updates the rescaling averages over"),
    (
        "kalei_layer_weights",
        [1.0, 2.0, 4.0, 8.0],
        None,
        "the diversity loss's weight of each layer (fc1 to fc4)",
    ),
    (
        "kalei_threshold_reset_scale",
        5.0,
        "float >= 0",
        "as kalei_threshold_init_scale, for the thresholds of reset weights",
    ),
    ("kalei_threshold_reset_bias", 5.0, "float", "see kalei_threshold_reset_scale"),
    (
        "kalei_reset_interval",
        1000000,
        "int >= 1",
        "env steps between resets of the weights every mask prunes (none within one interval of t_max)",
    ),
    ("kalei_reset_ratio", 0.2, "float in [0, 1]", "the chance that such a weight is reset"),
)


class Kaleidoscope:
    def __init__(self, args, agent):
        self.args, self.agent = args, agent
        self.td_history = deque(maxlen=args.kalei_deque_len)
        self.div_history = deque(maxlen=args.kalei_deque_len)
        self.last_reset_t = 0

    def describe(self):
        types = self.args.kalei_n_unit_types
        return f"one mask per unit type ({types})" if types else f"one mask per agent ({self.args.n_agents})"

    def maybe_reset(self, t_env):
        """Every kalei_reset_interval env steps, not within one interval of t_max: each weight that
        every mask prunes is drawn afresh with probability kalei_reset_ratio. -> how many, or None."""
        a = self.args
        interval = a.kalei_reset_interval
        if not (t_env - self.last_reset_t > interval and a.t_max - t_env > interval):
            return None
        self.last_reset_t = t_env
        scale, bias = a.kalei_threshold_reset_scale, a.kalei_threshold_reset_bias
        return sum(layer.reset_pruned(a.kalei_reset_ratio, scale, bias) for layer in self.agent.reset_layers)

    def coefficient(self, td_loss, div_loss):
        """|div_coef * mean(TD loss) / mean(diversity loss)| over the last kalei_deque_len updates
        (div_coef itself while the diversity losses average 0)."""
        self.td_history.append(float(td_loss))
        self.div_history.append(float(div_loss))
        average = mean(self.div_history)
        if average == 0:
            return self.args.kalei_div_coef
        return abs(self.args.kalei_div_coef * mean(self.td_history) / average)

    def loss(self, td_loss):
        """-> (the diversity term to add, its statistics)."""
        div = self.agent.diversity_loss(self.args.kalei_layer_weights)
        coef = self.coefficient(td_loss.item(), div.item())
        return coef * div, {"div_loss": div, "div_coef": coef}

    def state_dict(self):
        return {"td": list(self.td_history), "div": list(self.div_history), "last_reset_t": self.last_reset_t}

    def load_state_dict(self, state):
        self.td_history.extend(state["td"])
        self.div_history.extend(state["div"])
        self.last_reset_t = state["last_reset_t"]
