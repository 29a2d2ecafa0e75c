"""Config keys of PyMARL, EPyMARL, PyMARL2 and PyMARL3, read as ours.

A researcher brings a YAML file written for one of those frameworks. Each of its keys that is not
one of ours is in one of three tables here:

- RENAMED: it means the same as one (or a few) of our keys; the value is carried over, and a note
  says so (`rnn_hidden_dim: 256` -> `hidden_dim: 256`).
- IMPLIED: it has no effect here, and is accepted when its value is the one our settings imply
  (`agent_output_type: q` with a Q-learner, `use_per: False`); any other value is refused.
- MISSING: it asks for something this framework does not have, whatever its value; refused.

Registry names that differ (PyMARL2's `nq_learner`, `n_mac`, `n_rnn`; EPyMARL's action selectors)
are in VALUE_NAMES. Any other unknown key is refused by config.py with the nearest valid names.
"""

from utils.keys import FORMER_NAMES

Q_LEARNERS = {"q_learner", "q_divide_learner"}
AC_LEARNERS = {"actor_critic_learner", "ppo_learner", "coma_learner"}
EPYMARL_HIDDEN_DIM = 64  # EPyMARL's default.yaml; its critics take hidden_dim too


def _target_update(value, cfg):
    # EPyMARL: a value >= 1 is a hard update every that many episodes, below 1 a soft update rate
    if value >= 1:
        return {"target_update_mode": "hard", "target_update_interval": int(value)}
    return {"target_update_mode": "soft", "tau": float(value)}


def _critic_type(value, cfg):
    # EPyMARL's critics are as wide as its agents (hidden_dim)
    return {"critic": value, "critic_hidden_dim": cfg.get("hidden_dim", EPYMARL_HIDDEN_DIM)}


def _agent_output_type(value, cfg):
    learner = cfg.get("learner")
    if value == "q" and learner in Q_LEARNERS:
        return {}
    if value == "pi_logits" and learner == "maddpg_learner":
        return {}
    if (
        value == "pi_logits"
        and learner in AC_LEARNERS
        and cfg.get("mac", "basic_mac") in ("basic_mac", "ac_mac")
    ):
        return {"mac": "ac_mac"}  # their basic_mac outputs a policy when told pi_logits: ours is ac_mac
    return None


def _multinomial(value, cfg):
    # PyMARL's COMA samples its policy mixed with an epsilon-greedy floor (epsilon_start -> finish)
    return {"policy_epsilon_floor": float(cfg.get("epsilon_start", 0.0)) > 0}


def _coma_td_lambda(cfg):
    """PyMARL's and PyMARL2's COMA train the critic on TD(lambda) targets."""
    return cfg.get("learner") == "coma_learner" and "td_lambda" in cfg and "return_estimator" not in cfg


SHARING = "the researcher's experience sharing"
PUBLISHED = "the researcher's published INSPIRE code (jnzhang233/INSPIRE)"
PROBABILITY_VERSIONS = {1: "density", 2: "joint_density"}
RECEIVE_VERSIONS = {0: "all", 1: "gaussian_gate", 2: "sigmoid_gate"}


def _version(key, versions, value):
    return {key: versions[value]} if value in versions else None


# key -> (translation(value, the file's keys) -> {our key: value}, whose key it is)
RENAMED = {
    "rnn_hidden_dim": (lambda v, c: {"hidden_dim": v}, "PyMARL, PyMARL2, PyMARL3"),
    "use_cuda": (lambda v, c: {"device": "auto" if v else "cpu"}, "PyMARL family"),
    "target_update_interval_or_tau": (_target_update, "EPyMARL"),
    "add_value_last_step": (lambda v, c: {"time_limit_bootstrap": bool(v)}, "EPyMARL"),
    "standardise_returns": (lambda v, c: {"value_norm": "running" if v else "none"}, "EPyMARL"),
    "use_rnn": (lambda v, c: {"agent": "rnn" if v else "mlp"}, "EPyMARL"),
    "critic_type": (_critic_type, "EPyMARL"),
    "obs_individual_obs": (lambda v, c: {"critic_individual_obs": bool(v)}, "EPyMARL"),
    "reg": (lambda v, c: {"actor_reg": v}, "EPyMARL (MADDPG)"),
    "wandb_team": (lambda v, c: {"wandb_entity": v}, "EPyMARL"),
    "entropy": (lambda v, c: {"entropy_coef": v}, "PyMARL2"),
    "critic_coef": (lambda v, c: {"value_loss_coef": v}, "PyMARL2"),
    "mini_epochs": (lambda v, c: {"epochs": v}, "PyMARL2"),
    "use_value_norm": (lambda v, c: {"value_norm": "ema" if v else "none"}, "PyMARL2"),
    "agent_output_type": (_agent_output_type, "PyMARL family"),
    "critic_q_fn": (lambda v, c: {"critic": "coma_critic"} if v == "coma" else None, "PyMARL's COMA"),
    "per_beta": (lambda v, c: {"per_beta_start": v}, "PyMARL2's PER"),
    "transformer_embedding_dim": (lambda v, c: {"transformer_embed_dim": v}, "PyMARL3's transformer agent"),
    # The researcher's DIFFER-with-sharing code (learners/sharing.py)
    "ESR_selected_ratio_start": (lambda v, c: {"share_ratio_start": v}, SHARING),
    "ESR_selected_ratio_end": (lambda v, c: {"share_ratio_end": v}, SHARING),
    "ESR_warm_up_ratio": (lambda v, c: {"share_warm_up_ratio": v}, SHARING),
    "probability_temperature": (lambda v, c: {"share_temperature": v}, SHARING),
    "probabilities_version": (lambda v, c: _version("share_rule", PROBABILITY_VERSIONS, v), SHARING),
    "receive_version": (lambda v, c: _version("receive_rule", RECEIVE_VERSIONS, v), SHARING),
    "min_eps": (lambda v, c: {"share_min_eps": float(v)}, PUBLISHED),
    # their False lets every other agent receive: with the own-error receive, the sender's own
    "use_visible_matrix": (lambda v, c: {} if v else {"share_receive": "own"}, PUBLISHED),
}
# DIFFER's keys under the names PyMARL3 and the published INSPIRE code give them (and ours had
# until they took the selected_ prefix: utils/keys.py's FORMER_NAMES)
for _former, _current in FORMER_NAMES.items():
    RENAMED[_former] = (lambda v, c, k=_current: {k: v}, "DIFFER's name in PyMARL3; ours before 2026-12")
# key -> (accepted(value, the file's keys), what another value would ask for)
IMPLIED = {
    "repeat_id": (lambda v, c: True, "Sacred bookkeeping"),
    "label": (lambda v, c: True, "Sacred bookkeeping"),
    "q_lambda": (lambda v, c: not v, "Q(lambda) targets"),
    "return_priority": (lambda v, c: not v, "prioritised replay by episode return"),
    "use_orthogonal": (lambda v, c: not v, "orthogonal weight initialisation"),
    "gain": (lambda v, c: not c.get("use_orthogonal"), "use_orthogonal's gain"),
    "mask_before_softmax": (lambda v, c: bool(v), "softmax over unavailable actions too"),
    "critic_baseline_fn": (lambda v, c: v == "coma", "another COMA baseline"),
    "critic_train_mode": (lambda v, c: v == "seq", "COMA critic training in one batch"),
    "critic_train_reps": (lambda v, c: v == 1, "several COMA critic passes per update"),
    "q_nstep": (lambda v, c: v >= 1 or _coma_td_lambda(c), "n-step returns with n=0"),
    "save_probs": (
        lambda v, c: bool(v) and c.get("learner") == "ppo_learner",
        "PPO without old probabilities",
    ),
    "render": (lambda v, c: not v, "rendering during training"),
    "hpn_hyper_activation": (lambda v, c: v == "relu", "another activation in HPN's hypernetworks"),
    "wandb_save_model": (lambda v, c: not v, "uploading checkpoints to W&B"),
    # the published INSPIRE code's (learners/sharing_rows.py)
    "scheme": (lambda v, c: v in ("differ", "inspire"), "another batch layout (ours comes from the learner)"),
    "ESR_warm_up": (lambda v, c: bool(v), "a fixed share ratio (ESR_selected_ratio) instead of its schedule"),
    "ESR_selected_ratio": (lambda v, c: bool(c.get("ESR_warm_up", True)), "a share ratio without warm-up"),
    # read only by their super_learner, whose gate is our share_rule=mean_std_gate
    "use_ESR_based_on_normal_distribution": (lambda v, c: True, "(read by their SUPER learner only)"),
}
# key -> what it asks for
MISSING = {
    "accumulated_episodes": "PyMARL2's PPO update over episodes accumulated across runner calls",
    "runner_scope": "EPyMARL's transition-scoped runner",
    "obs_entity_mode": "entity observations of other frameworks' envs",
}
# key -> {their registry name: ours (None: drop the key, ours needs none)}
VALUE_NAMES = {
    "learner": {
        "nq_learner": "q_learner",
        # the published INSPIRE repository's DIFFER learners; what each adds is in the config
        "qmix_differ": "q_divide_learner",
        "per_learner": "q_divide_learner",
        "super_learner": "q_divide_learner",
        "inspire_learner": "q_divide_learner",
    },
    "runner": {"episode_inspire": "episode", "episode_differ": "episode"},
    "mac": {"n_mac": "basic_mac", "hpn_mac": "basic_mac"},
    "agent": {"n_rnn": "rnn"},
    "action_selector": {"soft_policies": None, "multinomial": None},
}
SELECTOR_RULES = {"multinomial": _multinomial}
# --config / --env-config names of theirs that are ours under another name
CONFIG_NAMES = {
    "algs": {"differ_qmix_transformertest": "differ_qmix_transformer"},
    "envs": {},
    "whose": {"differ_qmix_transformertest": "PyMARL3's DIFFER config with the transformer agent"},
}


def translate(cfg, known, context=None):
    """-> (cfg with every peer key replaced by ours, [notes], {key: why refused}). `known`: our
    keys; a key that is both ours and a peer's (none today) stays ours. `context`: the config the
    file is merged into (a rule asks it for keys the file leaves out, such as the learner)."""
    cfg = dict(cfg)
    notes, refused = [], {}
    for key, names in VALUE_NAMES.items():
        value = cfg.get(key)
        if isinstance(value, str) and value in names:
            ours = names[value]
            if ours is None:
                del cfg[key]
                notes.append(f"{key}: {value} dropped (ac_mac samples its policy itself)")
                rule = SELECTOR_RULES.get(value) if key == "action_selector" else None
                if rule:
                    extra = rule(value, cfg)
                    cfg.update(extra)
                    notes[-1] += f" ({_show(extra)})"
            else:
                cfg[key] = ours
                notes.append(f"{key}: {value} -> {key}: {ours}")
    seen = {**(context or {}), **cfg}  # what each rule reads
    coma_td_lambda = _coma_td_lambda(cfg) and seen.get("learner") == "coma_learner"
    if coma_td_lambda and cfg.get("q_nstep") == 0:  # their COMA reads no q_nstep with TD(lambda)
        del cfg["q_nstep"]
        notes.append("q_nstep: 0 has no effect with TD(lambda) targets: dropped")
    out = {}
    for key, value in cfg.items():
        if key in known:
            out[key] = value
        elif key in RENAMED:
            rule, whose = RENAMED[key]
            mapped = rule(value, seen)
            if mapped is None:
                refused[key] = f"{key}: {value!r} has no counterpart here" + (
                    f" with learner {seen.get('learner')!r}" if whose != SHARING else " (valid: 0, 1, 2)"
                )
                continue
            out.update({k: v for k, v in mapped.items() if k not in cfg})
            notes.append(f"{key}: {value!r} -> {_show(mapped) or 'nothing to set'} ({whose})")
        elif key in IMPLIED:
            accepted, other = IMPLIED[key]
            if accepted(value, seen):
                notes.append(f"{key}: {value!r} accepted: it is what our settings do (no key to set)")
            else:
                refused[key] = f"{key}: {value!r} asks for {other}, which this framework does not have"
        elif key in MISSING:
            refused[key] = f"{key} asks for {MISSING[key]}, which this framework does not have"
        else:
            out[key] = value  # unknown: config.py refuses it with the nearest names
    if coma_td_lambda:
        out["return_estimator"] = "td_lambda"
        notes.append(f"td_lambda: {cfg['td_lambda']} with coma_learner -> return_estimator: td_lambda")
    return out, notes, refused


def _show(mapping):
    return ", ".join(f"{k}: {v!r}" for k, v in mapping.items())
