"""Tables as Markdown, and runs in marl-eval's JSON layout."""

from utils.stats import markdown_table


def markdown(table, float_format="{:.2f}"):
    rows = [
        [float_format.format(v) if isinstance(v, float) else str(v) for v in row]
        for _, row in table.iterrows()
    ]
    return "\n".join(markdown_table(list(table.columns), rows)) + "\n"


def marl_eval_name(metric):
    """test_return_mean -> return, test_battle_won_mean -> win_rate (marl-eval's names)."""
    name = metric.removeprefix("test_").removesuffix("_mean")
    return {"battle_won": "win_rate"}.get(name, name)


def to_marl_eval(df, metric):
    """{env: {task: {group: {run_<i>: {step_<k>: {step_count, name: [value]}, absolute_metrics}}}}}.
    Each evaluation holds one value, the mean over its test episodes (Sacred keeps no
    per-episode test returns); absolute_metrics repeats the last evaluation."""
    name = marl_eval_name(metric)
    out = {}
    for (env, task, group), g in df.groupby(["env", "task", "group"], sort=True):
        algo = out.setdefault(str(env), {}).setdefault(str(task), {}).setdefault(str(group), {})
        for i, (_, r) in enumerate(sorted(g.groupby("run_dir"), key=lambda x: (x[1]["seed"].iloc[0], x[0]))):
            r = r.sort_values("t_env")
            run = {
                f"step_{k}": {"step_count": int(t), name: [float(v)]}
                for k, (t, v) in enumerate(zip(r["t_env"], r["value"], strict=True))
            }
            run["absolute_metrics"] = {name: [float(r["value"].iloc[-1])]}
            algo[f"run_{i}"] = run
    return out
