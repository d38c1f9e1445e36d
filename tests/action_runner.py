"""A composite GitHub Action run the way a Linux runner runs it, for tests (no network, no Docker).

`run_action(folder, inputs, ...)` reads folder/action.yml and goes through its steps in order:
each `if:` is evaluated (GitHub's expression syntax, the part action.yml uses: contexts
`inputs`, `runner`, `github`, `steps`; `==`, `!=`, `&&`, `||`, `!`, parentheses, '' strings;
as with GitHub's implicit success(), no step runs after one has failed), `${{ }}` in `env:` and `with:` is
substituted, a `run:` step is executed as the runner does (`bash --noprofile --norc -eo pipefail
FILE`, with GITHUB_ACTION_PATH, RUNNER_TEMP, GITHUB_OUTPUT, GITHUB_STEP_SUMMARY) and a `uses:`
step is recorded (name and inputs) instead of run. Step outputs come from GITHUB_OUTPUT lines.
"""
from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass, field

import yaml

_TOKEN = re.compile(r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<op>==|!=|&&|\|\||!|\(|\))"
                    r"|(?P<name>[A-Za-z_][A-Za-z0-9_.\-]*))")


class _Expression:
    """A recursive-descent evaluator of one `${{ }}` expression against `contexts`."""

    def __init__(self, text: str, contexts: dict):
        self.tokens, self.contexts, self.at = self._tokens(text), contexts, 0

    @staticmethod
    def _tokens(text: str) -> list:
        out, pos = [], 0
        while pos < len(text.rstrip()):
            match = _TOKEN.match(text, pos)
            if not match:
                raise ValueError(f"cannot read the expression at {text[pos:]!r}")
            out.append((match.lastgroup, match.group(match.lastgroup)))
            pos = match.end()
        return out

    def value(self):
        result = self._or()
        if self.at != len(self.tokens):
            raise ValueError(f"unexpected {self.tokens[self.at]}")
        return result

    def _peek(self):
        return self.tokens[self.at][1] if self.at < len(self.tokens) else None

    def _or(self):
        left = self._and()
        while self._peek() == "||":
            self.at += 1
            right = self._and()
            left = left if left else right
        return left

    def _and(self):
        left = self._compare()
        while self._peek() == "&&":
            self.at += 1
            right = self._compare()
            left = right if left else left
        return left

    def _compare(self):
        left = self._unary()
        while self._peek() in ("==", "!="):
            op = self.tokens[self.at][1]
            self.at += 1
            right = self._unary()
            same = str(left if left is not None else "").lower() == str(
                right if right is not None else "").lower()
            left = same if op == "==" else not same
        return left

    def _unary(self):
        if self._peek() == "!":
            self.at += 1
            return not self._unary()
        if self._peek() == "(":
            self.at += 1
            inner = self._or()
            self.at += 1  # ")"
            return inner
        kind, text = self.tokens[self.at]
        self.at += 1
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if text in ("true", "false"):
            return text == "true"
        value = self.contexts
        for part in text.split("."):
            value = value.get(part) if isinstance(value, dict) else None
        return value


def evaluate(text: str, contexts: dict):
    return _Expression(text, contexts).value()


def substitute(text: str, contexts: dict) -> str:
    def one(match):
        value = evaluate(match.group(1), contexts)
        if isinstance(value, bool):
            return "true" if value else "false"
        return "" if value is None else str(value)
    return re.sub(r"\$\{\{(.*?)\}\}", one, str(text))


def condition(text, contexts: dict) -> bool:
    text = str(text).strip()
    if text.startswith("${{") and text.endswith("}}"):
        text = text[3:-2]
    return bool(evaluate(text, contexts))


@dataclass
class ActionRun:
    """What running an action did: each step's name and whether it ran, the `uses:` steps it
    would have run (name, inputs), everything the run steps printed, and whether it failed."""

    ran: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    used: list = field(default_factory=list)
    stdout: str = ""
    failed: bool = False
    outputs: dict = field(default_factory=dict)


def run_action(folder: str, inputs: dict, *, workspace: str, temp: str, env: dict,
               github: dict | None = None, timeout: int = 900) -> ActionRun:
    with open(os.path.join(folder, "action.yml"), encoding="utf-8") as handle:
        action = yaml.safe_load(handle)
    values = {name: str(spec.get("default", "")) for name, spec in action["inputs"].items()}
    values.update({k: str(v).lower() if isinstance(v, bool) else str(v)
                   for k, v in inputs.items()})
    contexts = {"inputs": values, "runner": {"os": "Linux", "temp": temp},
                "github": dict(github or {"event_name": "push", "repository": "me/trainer",
                                          "actor": "me"}), "steps": {}}
    result = run_steps(action["runs"]["steps"], contexts, folder=folder, workspace=workspace,
                       temp=temp, env=env, timeout=timeout)
    result.outputs = {name: substitute(spec["value"], contexts)
                      for name, spec in (action.get("outputs") or {}).items()}
    return result


def run_steps(steps: list, contexts: dict, *, folder: str, workspace: str, temp: str, env: dict,
              timeout: int = 900) -> ActionRun:
    """Run a job's (or a composite action's) steps in order, as the runner would: `run:`
    scripts with bash -eo pipefail in the workspace, `uses:` steps recorded, not run."""
    contexts.setdefault("steps", {})     # each step's outputs, for the ones after it
    summary = os.path.join(temp, "step-summary.md")
    result = ActionRun()
    for number, step in enumerate(steps):
        name = step.get("name", f"step {number}")
        # GitHub adds success() to every condition without a status function
        wanted = not result.failed and (condition(step["if"], contexts) if "if" in step else True)
        if not wanted:
            result.skipped.append(name)
            continue
        result.ran.append(name)
        if "uses" in step:
            result.used.append((step["uses"], {k: substitute(v, contexts)
                                               for k, v in (step.get("with") or {}).items()}))
            continue
        output = os.path.join(temp, f"output-{number}")
        script = os.path.join(temp, f"step-{number}.sh")
        with open(script, "w", encoding="utf-8") as handle:
            handle.write(substitute(step["run"], contexts))
        step_env = dict(env, GITHUB_ACTION_PATH=folder, RUNNER_TEMP=temp, GITHUB_OUTPUT=output,
                        GITHUB_STEP_SUMMARY=summary, GITHUB_WORKSPACE=workspace)
        step_env.update({k: substitute(v, contexts) for k, v in (step.get("env") or {}).items()})
        done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", script],
                              cwd=workspace, env=step_env, capture_output=True, text=True,
                              timeout=timeout)
        result.stdout += done.stdout + done.stderr
        outputs = {}
        if os.path.exists(output):
            with open(output, encoding="utf-8") as handle:
                outputs = dict(line.rstrip("\n").split("=", 1) for line in handle if "=" in line)
        if step.get("id"):
            contexts["steps"][step["id"]] = {"outputs": outputs}
        if done.returncode != 0:
            result.failed = True
    return result
