"""memlint: catch out-of-memory and launch-time errors in LLM training configs before submission.

The public API (memlint.api, imported on first use so that `memlint --version` stays instant):

    memlint.check(paths, *, model=None, select=(), ignore=(), fail_on=None, **scenario)
    memlint.estimate(paths=(), *, model=None, **scenario)
    memlint.plan(paths=(), *, model=None, gpus=None, top=10, headroom=0.10, **scenario)
    memlint.fit(paths=(), *, model=None, headroom=None, questions=(), planner=False, **scenario)
    memlint.compare(log, paths=(), *, model=None, **scenario)
"""

__version__ = "0.2.0"
DISTRIBUTION = "memlint-llm"        # the name on the package index (`pip install memlint-llm`)

_API = ("check", "estimate", "plan", "fit", "compare", "CheckResult", "MemlintError", "Options")


TYPE_CHECKING = False   # start-up: the type checker sees the API's names; Python loads them lazily
if TYPE_CHECKING:
    from memlint.api import CheckResult as CheckResult  # noqa: F401 (re-exported)
    from memlint.api import MemlintError as MemlintError  # noqa: F401 (re-exported)
    from memlint.api import Options as Options  # noqa: F401 (re-exported)
    from memlint.api import check as check  # noqa: F401 (re-exported)
    from memlint.api import compare as compare  # noqa: F401 (re-exported)
    from memlint.api import estimate as estimate  # noqa: F401 (re-exported)
    from memlint.api import fit as fit  # noqa: F401 (re-exported)
    from memlint.api import plan as plan  # noqa: F401 (re-exported)


def __getattr__(name: str) -> object:  # PEP 562: the API's imports cost nothing until it is used
    if name in _API:
        # start-up: PEP 562, the API loads on first use
        from memlint import api

        return getattr(api, name)
    raise AttributeError(f"module 'memlint' has no attribute {name!r}")


__all__ = ["__version__", "DISTRIBUTION", *_API]
