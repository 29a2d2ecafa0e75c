"""Scripted reference strategies on mpe2's simple_adversary_v3 (discrete actions): what returns
each kind of play earns, to read learned figures against.

    python bench/adversary_scripted.py [--episodes 2000]

Good team: random actions; "race" (both good agents go to the target); "split" (the one nearer
the target takes it, the other covers the other landmark, so the adversary cannot tell them
apart). Adversary: random actions; "follow" (goes to the landmark nearest to a good agent);
"oracle" (knows the target: a bound no learned adversary can pass). Each pairing prints the mean
episode return (25 steps, summed) of the adversary and of a good agent, with standard errors.
"""

import argparse

import numpy as np

# mpe2 discrete actions: 0 no-op, 1 -x, 2 +x, 3 -y, 4 +y
AXIS_ACTIONS = ((1, 2), (3, 4))


def steer(entity, target):
    """Greedy discrete move towards `target` that brakes: it aims at where coasting would stop
    (velocity decays by 0.75 a step, 0.1 s steps)."""
    err = target - entity.state.p_pos - entity.state.p_vel * 0.3
    if np.abs(err).max() < 0.03:
        return 0
    axis = int(np.abs(err).argmax())
    return AXIS_ACTIONS[axis][int(err[axis] > 0)]


def good_targets(strategy, good, target, other):
    if strategy == "random":
        return None
    near, far = sorted(good, key=lambda g: np.linalg.norm(g.state.p_pos - target.state.p_pos))
    return {near.name: target.state.p_pos, far.name: (target if strategy == "race" else other).state.p_pos}


def adversary_target(strategy, good, world, target):
    if strategy == "random":
        return None
    if strategy == "oracle":
        return target.state.p_pos
    lm = min(
        world.landmarks, key=lambda lm: min(np.linalg.norm(g.state.p_pos - lm.state.p_pos) for g in good)
    )
    return lm.state.p_pos


def play(good_strategy, adv_strategy, episodes, rng):
    from mpe2 import simple_adversary_v3

    env = simple_adversary_v3.parallel_env(max_cycles=25)
    returns = []
    for ep in range(episodes):
        env.reset(seed=ep)
        world = env.unwrapped.world
        adv, good = world.agents[0], world.agents[1:]
        target = good[0].goal_a
        other = next(lm for lm in world.landmarks if lm is not target)
        ret = np.zeros(len(env.possible_agents))
        while env.agents:
            goals = good_targets(good_strategy, good, target, other) or {}
            adv_goal = adversary_target(adv_strategy, good, world, target)
            acts = {}
            for a in world.agents:
                goal = adv_goal if a is adv else goals.get(a.name)
                acts[a.name] = int(rng.integers(5)) if goal is None else steer(a, goal)
            _, rewards, *_ = env.step(acts)
            ret += [rewards[a] for a in env.possible_agents]
        returns.append(ret)
    returns = np.array(returns)
    return returns.mean(0), returns.std(0) / np.sqrt(episodes)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--episodes", type=int, default=2000)
    a = p.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'good team':>9s}  {'adversary':>9s}  {'adversary return':>17s}  {'good agent return':>17s}")
    for good_strategy in ("random", "race", "split"):
        for adv_strategy in ("random", "follow", "oracle"):
            mean, se = play(good_strategy, adv_strategy, a.episodes, rng)
            print(
                f"{good_strategy:>9s}  {adv_strategy:>9s}  {mean[0]:9.2f} ± {se[0]:4.2f}  "
                f"{mean[1]:9.2f} ± {se[1]:4.2f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
