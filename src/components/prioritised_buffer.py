"""Prioritised replay of whole episodes."""

import numpy as np
import torch

from components.episode_buffer import ReplayBuffer


class PrioritisedReplayBuffer(ReplayBuffer):
    """Prioritised replay of whole episodes (Schaul et al. 2016, proportional variant, as PyMARL2
    applies it to episodes): episode k is drawn with probability P_k = p_k^alpha / sum_j p_j^alpha
    (with replacement), p_k = its priority + epsilon; a new episode enters at the largest p seen so
    far; each draw carries the importance weight (N P_k)^-beta / max_j (N P_j)^-beta, the maximum
    over the stored episodes, as `is_weights` [B]. The learner returns each episode's new priority
    (train() -> {"priorities": [B]}); run.py hands it to learn()."""

    def __init__(self, scheme, groups, buffer_size, max_seq_length, *, alpha, epsilon, beta, **batch_args):
        """beta: t_env -> the importance-weight exponent at that step."""
        super().__init__(scheme, groups, buffer_size, max_seq_length, **batch_args)
        self.alpha, self.epsilon, self.beta = alpha, epsilon, beta
        self.priorities = np.zeros(buffer_size)  # p_k (priority + epsilon) of each slot
        self.max_priority = 1.0

    def insert_episode_batch(self, ep_batch):
        slots = super().insert_episode_batch(ep_batch)
        self.priorities[slots] = self.max_priority
        return slots

    def restore_priorities(self, priorities, max_priority):
        """What an earlier run had learned of the held episodes (a log's replay)."""
        self.priorities[: len(priorities)] = priorities
        self.max_priority = max_priority

    def probabilities(self):
        """P over the stored episodes [episodes_in_buffer]."""
        p = self.priorities[: self.episodes_in_buffer] ** self.alpha
        return p / p.sum()

    def sample(self, batch_size, t_env=0):
        assert self.can_sample(batch_size)
        probs = self.probabilities()
        ep_ids = np.random.choice(self.episodes_in_buffer, batch_size, replace=True, p=probs)
        batch = self._episodes(ep_ids)
        n, beta = self.episodes_in_buffer, self.beta(t_env)
        weights = (n * probs[ep_ids]) ** -beta / (n * probs.min()) ** -beta
        batch.is_weights = torch.as_tensor(weights, dtype=torch.float32)
        return batch

    def learn(self, ep_ids, feedback):
        priorities = feedback.get("priorities") if feedback else None
        if priorities is None:
            return
        p = np.asarray(priorities.detach().cpu(), dtype=np.float64) + self.epsilon
        self.priorities[np.asarray(ep_ids)] = p
        self.max_priority = max(self.max_priority, float(p.max()))

    def state_dict(self):
        state = super().state_dict()
        state["priorities"] = torch.as_tensor(self.priorities[: self.episodes_in_buffer].copy())
        state["max_priority"] = self.max_priority
        return state

    def load_state_dict(self, state):
        super().load_state_dict(state)
        n = self.episodes_in_buffer
        if "priorities" in state:
            self.priorities[:n] = state["priorities"].numpy()
            self.max_priority = float(state["max_priority"])
        else:  # a buffer saved without priorities (or rebuilt from its log): all start equal
            self.priorities[:n] = self.max_priority
