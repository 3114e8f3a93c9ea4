"""Before `csbench submit` pays for a controller: the smoke runbook's prerequisites, checked.

Each item reads real files and the environment (names only — a value never leaves this
module, not even its length) and says pass / warn / fail / skip with its evidence:

- the plan is a submit plan csbench accepts (`task_id:` entries, known `driver:` keys);
- the local config exists, is not committed to git (it is gitignored in the runbook), and says
  `target.mode: real` when the plan has `suite:` tasks — else the suite bridge runs csbench's
  canned fixtures on full-price infra (csbench itself only prints a warning). That one failure
  may be accepted on purpose by typing the word `mock` in the console's dialog; nothing else
  may be;
- the target keys csbench and the runbook need (region, blob_bucket, auth_env names,
  arms_license_key), the terraform credentials `ALICLOUD_*`, the watchdog timeout, the
  terraform dir `csbench submit` runs in, the `csbench` program;
- llm mode's caveat: `DASHSCOPE_API_KEY` is not delivered to the driver on the prod path;
- the balance (≥ ¥100), which evaldesk cannot read: said, never passed;
- the same plan submitted before and not torn down yet: a second controller, NAT and EIP.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Mapping

from services.csbench.cli import Settings
from services.csbench.formats import DRIVER_KEYS, PROD_TF_DIR
from services.csbench.model import PreflightItem, PreflightStatus, SubmitMark
from services.csbench.plans import LocalConfig, PlanFile

# terraform's alicloud provider reads these (the runbook's RAM credentials for `terraform apply`)
ALICLOUD_ENV = ("ALICLOUD_ACCESS_KEY", "ALICLOUD_SECRET_KEY", "ALICLOUD_REGION")
LLM_KEY_ENV = "DASHSCOPE_API_KEY"
CONFIRM_WORD = "mock"
MIN_BALANCE_CNY = 100
GIT_TIMEOUT_S = 10.0


def _item(id_: str, title: str, status: PreflightStatus, evidence: str, fix: str | None = None,
          word: str | None = None) -> PreflightItem:
    return PreflightItem(id=id_, title=title, status=status, evidence=evidence, fix=fix, word=word)


def git_state(path: str) -> tuple[str, str]:
    """("tracked" | "ignored" | "untracked" | "no-repo" | "no-git", the checkout's root or why)."""
    git = shutil.which("git")
    if git is None:
        return "no-git", "git is not installed here"
    here, name = os.path.split(os.path.abspath(path))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([git, "-C", here, *args], capture_output=True, text=True, timeout=GIT_TIMEOUT_S,
                              stdin=subprocess.DEVNULL, env={**os.environ, "GIT_OPTIONAL_LOCKS": "0"})

    try:
        top = run("rev-parse", "--show-toplevel")
        if top.returncode != 0:
            return "no-repo", "not in a git checkout"
        root = top.stdout.strip()
        if run("ls-files", "--error-unmatch", "--", name).returncode == 0:
            return "tracked", root
        if run("check-ignore", "-q", "--", name).returncode == 0:
            return "ignored", root
        return "untracked", root
    except (OSError, subprocess.TimeoutExpired) as exc:
        return "no-git", f"git did not answer: {exc}"


def check_plan(plan: PlanFile) -> PreflightItem:
    title = "Submit plan csbench accepts"
    if plan.problems:
        return _item("plan_file", title, "fail", f"{plan.path}: {'; '.join(plan.problems)}",
                     "fix the plan file")
    run_plan = [t.task_id for t in plan.tasks if t.shape == "run-plan"]
    if run_plan:
        return _item("plan_file", title, "fail", f"{len(run_plan)} task(s) written `task: {run_plan[0]}` — the "
                     "run-plan shape; csbench submit needs `task_id:` and refuses the plan",
                     "write each task as `- task_id: \"suite:…\"` with its params")
    unknown = sorted(set(plan.driver) - set(DRIVER_KEYS))
    if unknown:
        return _item("plan_file", title, "fail", f"unknown driver key(s) {', '.join(unknown)}: csbench submit "
                     f"rejects them (known: {', '.join(DRIVER_KEYS)})", "remove or rename them")
    kinds = sorted({t.agent_kind for t in plan.tasks if t.agent_kind})
    parts = [f"{len(plan.tasks)} task(s): " + ", ".join(t.task_id for t in plan.tasks[:4])
             + (" …" if len(plan.tasks) > 4 else "")]
    if kinds:
        parts.append(f"agent_kind {', '.join(kinds)}")
    if plan.driver:
        parts.append(f"driver {', '.join(sorted(plan.driver))}")
    parts.append(f"cost_budget ${plan.cost_budget:g}" if plan.cost_budget is not None else "no cost_budget")
    return _item("plan_file", title, "pass", "; ".join(parts))


def check_config_file(s: Settings, cfg: LocalConfig) -> PreflightItem:
    title = "Local csbench config"
    if cfg.problem:
        return _item("config_file", title, "fail", cfg.problem,
                     "create it ([csbench] config): target.region, target.blob_bucket, target.auth_env, "
                     "target.arms_license_key, target.mode: real")
    if not cfg.target:
        return _item("config_file", title, "fail", f"{s.config} has no target: section",
                     "add target: with region, blob_bucket, auth_env, arms_license_key and mode: real")
    return _item("config_file", title, "pass", f"{s.config}")


def check_not_committed(s: Settings, cfg: LocalConfig) -> PreflightItem:
    title = "Local config not committed"
    if cfg.problem:
        return _item("config_not_committed", title, "skip", "no config file to look at")
    state, detail = git_state(s.config)
    name = os.path.basename(s.config)
    if state == "tracked":
        return _item("config_not_committed", title, "fail", f"{name} is committed to the git checkout {detail}: it "
                     "names the bucket, the credential variables and the ARMS license key",
                     f"git rm --cached {name}, add it to .gitignore, and rotate the ARMS key if it was pushed")
    if state == "untracked":
        return _item("config_not_committed", title, "warn", f"{name} is not committed, but not ignored either: one "
                     "`git add .` from committed", f"add {name} to .gitignore")
    if state == "ignored":
        return _item("config_not_committed", title, "pass", f"{name} is gitignored in {detail}")
    return _item("config_not_committed", title, "pass", f"{name}: {detail}")


def check_mode(plan: PlanFile, cfg: LocalConfig, s: Settings) -> PreflightItem:
    title = "target.mode: real for suite tasks"
    suites = plan.suite_tasks
    if cfg.problem:
        return _item("target_mode", title, "skip", "no config file to read target.mode from")
    if not suites:
        return _item("target_mode", title, "skip", f"no suite: task in the plan (target.mode {cfg.mode or 'unset'})")
    if cfg.mode == "real":
        return _item("target_mode", title, "pass", f"target.mode: real in {os.path.basename(s.config)}; "
                     f"{len(suites)} suite task(s) run live")
    said = f"target.mode is {cfg.mode!r}" if cfg.mode else "target.mode is not set"
    return _item("target_mode", title, "fail",
                 f"{len(suites)} suite task(s) and {said} in {s.config}: the suite bridge then runs csbench's canned "
                 "fixtures — a full-price ECS campaign that replays mock results",
                 f"set target.mode: real in {os.path.basename(s.config)}; to pay for a mock run on purpose, type "
                 f"{CONFIRM_WORD} in the console's dialog", word=CONFIRM_WORD)


def check_target_keys(cfg: LocalConfig, env: Mapping[str, str]) -> PreflightItem:
    title = "Target keys: region, bucket, auth_env, ARMS"
    if cfg.problem:
        return _item("target_keys", title, "skip", "no config file to read target: from")
    t = cfg.target
    if "oss_bucket" in t:
        return _item("target_keys", title, "fail", "target.oss_bucket: csbench refuses it (renamed to blob_bucket)",
                     "rename target.oss_bucket to target.blob_bucket")
    missing = [k for k in ("region", "blob_bucket") if not t.get(k)]
    if missing:
        return _item("target_keys", title, "fail", f"target.{' and target.'.join(missing)} not set: csbench submit "
                     "writes the launch spec to that bucket", f"set target.{missing[0]}")
    auth = t.get("auth_env") if isinstance(t.get("auth_env"), dict) else {}
    names = [str(v) for v in (auth or {}).values()]
    unset = [n for n in names if not env.get(n)]
    if unset:
        return _item("target_keys", title, "fail", f"target.auth_env names {', '.join(unset)}, not set here",
                     f"export {', '.join(unset)} in this shell (evaldesk never reads or shows the values)")
    ev = f"target.region and target.blob_bucket set; auth_env {', '.join(names) if names else 'not given'}"
    if not t.get("arms_license_key"):
        return _item("target_keys", title, "warn", f"{ev}; no target.arms_license_key: the campaign reports no "
                     "traces or metrics", "add target.arms_license_key to the local config")
    return _item("target_keys", title, "pass", f"{ev}; arms_license_key set")


def check_credentials(env: Mapping[str, str]) -> PreflightItem:
    title = "Terraform credentials ALICLOUD_*"
    unset = [n for n in ALICLOUD_ENV if not env.get(n)]
    if unset:
        return _item("credentials", title, "fail", f"{', '.join(unset)} not set: terraform apply of the controller "
                     "and NAT needs the main account's AK", f"export {', '.join(unset)} in this shell")
    return _item("credentials", title, "pass", f"{', '.join(ALICLOUD_ENV)} set (values not read)")


def check_watchdog(s: Settings) -> PreflightItem:
    title = "--watchdog-timeout"
    w = s.watchdog_timeout_s
    if w <= 0:
        return _item("watchdog", title, "fail", f"--watchdog-timeout {w:g}: the controller would never be reaped",
                     "set [csbench] watchdog_timeout_s to the campaign's length with headroom (csbench: 5400)")
    return _item("watchdog", title, "pass", f"--watchdog-timeout {w:g}: the controller destroys itself after "
                 f"{w / 60:.0f} min even if nobody tears it down")


def check_llm_key(plan: PlanFile, env: Mapping[str, str]) -> PreflightItem:
    title = f"llm mode: {LLM_KEY_ENV} on the driver"
    llm = [t.task_id for t in plan.tasks if t.agent_kind == "llm"]
    if not llm:
        return _item("llm_key", title, "skip", "no llm task (oracle needs no LLM key)")
    here = "set in this shell, but that does not reach the driver" if env.get(LLM_KEY_ENV) else "not set here either"
    return _item("llm_key", title, "warn",
                 f"{len(llm)} llm task(s) ({llm[0]}): the prod submit path does not deliver {LLM_KEY_ENV} to the "
                 f"driver (cloud-init drops it; {here}) — the agent gets no key and yields empty patches",
                 f"submit with controller_debug=true and export {LLM_KEY_ENV} on the controller before it claims the "
                 "suite task, or run llm mode locally (csbench run-plan) with the key in your shell")


def check_workdir(s: Settings) -> PreflightItem:
    title = "Terraform dir of the checkout"
    tf = os.path.join(s.workdir, PROD_TF_DIR)
    if not os.path.isdir(tf):
        return _item("terraform_dir", title, "fail", f"{tf} does not exist: csbench submit runs terraform apply there",
                     "set [csbench] workdir to the csbench checkout")
    return _item("terraform_dir", title, "pass", tf)


def check_executable(s: Settings) -> PreflightItem:
    title = "csbench program"
    exe = s.executable
    found = exe if os.sep in exe and os.access(exe, os.X_OK) and os.path.isfile(exe) else shutil.which(exe)
    if not found:
        return _item("executable", title, "fail", f"{exe}: command not found on this machine",
                     "pip install clousight-bench, or set [csbench] executable")
    return _item("executable", title, "pass", found)


def check_balance() -> PreflightItem:
    return _item("balance", f"Aliyun balance ≥ ¥{MIN_BALANCE_CNY}", "skip",
                 f"evaldesk cannot read the balance: check it is at least ¥{MIN_BALANCE_CNY} — below it the postpaid "
                 "ECS create is refused and submit fails in terraform apply with what looks like a quota error")


def check_not_submitted(plan: PlanFile, cfg: LocalConfig, earlier: list[SubmitMark],
                        torn_down: Mapping[str, bool]) -> PreflightItem:
    title = "Not submitted already"
    same = [m for m in earlier if m.plan_sha256 == plan.sha256 and m.config_sha256 == cfg.sha256 and m.campaign_id]
    live = [m for m in same if not torn_down.get(m.campaign_id or "")]
    if live:
        m = live[0]
        when = f"{m.at:%Y-%m-%d %H:%M} UTC" if m.at else "?"
        return _item("not_submitted", title, "fail",
                     f"this plan and config were submitted as {m.campaign_id} at {when} (record {m.record_id}), not "
                     "torn down yet: a second submit pays for a second controller, NAT and EIP",
                     f"follow {m.campaign_id}; tear it down (csbench teardown) before submitting it again")
    if same:
        return _item("not_submitted", title, "pass", f"submitted before as {same[0].campaign_id}, torn down since")
    return _item("not_submitted", title, "pass", "no earlier submit of this plan and config")


def run_preflight(s: Settings, plan: PlanFile, cfg: LocalConfig, earlier: list[SubmitMark],
                  torn_down: Mapping[str, bool], env: Mapping[str, str] | None = None) -> list[PreflightItem]:
    env = os.environ if env is None else env
    return [check_plan(plan), check_config_file(s, cfg), check_not_committed(s, cfg), check_mode(plan, cfg, s),
            check_target_keys(cfg, env), check_credentials(env), check_watchdog(s), check_llm_key(plan, env),
            check_workdir(s), check_executable(s), check_balance(), check_not_submitted(plan, cfg, earlier, torn_down)]


def blocking(items: list[PreflightItem], word: str | None = None) -> PreflightItem | None:
    """The first failure that stops the submit; one whose word was typed does not."""
    for item in items:
        if item.status == "fail" and not (item.word and word == item.word):
            return item
    return None
