"""Solutions: what one returns, the context it may ask for, and the recipe a worker builds it from.

``SolutionOutput`` keeps AgentScope's fields (``success``, ``output``, ``trajectory``, ``meta``). A solution is any
callable ``solution(task)`` or ``solution(task, context)``, sync or async, returning a ``SolutionOutput`` or a bare
value (wrapped as ``SolutionOutput(output=value)``). A class, or a function marked with :func:`solution_factory`, is
a recipe: a :class:`SolutionSpec` builds it once per worker (with the solution arguments it accepts, and
``benchmark=`` if it needs it: :mod:`runner.core.plugin`), so a model is loaded once per worker, not once per task.

Plug-ins import this module, never the engine: how a built solution is called (threads, timeouts) is the engine's.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from runner.core import plugin, signature
from runner.core.errors import ConfigError, PluginError
from runner.core.local_code import LocalCode, code_of_module, with_code

if TYPE_CHECKING:
    from runner.core.benchmark import BenchmarkBase

_FACTORY_MARK = "__runner_solution_factory__"


@dataclass
class SolutionOutput:
    """The answer of a solution to one task.

    Args:
        success: ``False`` when the solution itself reports failure; the record is then marked ``error``
            (its metrics still run).
        output: the final answer; must be JSON-serialisable (it is stored in the record).
        trajectory: the steps that led to it (tool calls with arguments and results, messages), JSON-serialisable.
        meta: any other JSON-serialisable detail.
    """

    success: bool = True
    output: Any = None
    trajectory: list[Any] = field(default_factory=list)
    meta: dict[str, Any] | None = None


@dataclass
class SolutionContext:
    """Passed as the second argument to a solution that takes two.

    Args:
        run_id: the run's id.
        task_id: the task's id.
        repeat: the repeat index (0-based).
        attempt: 1 on the first try; higher when the item is retried after a worker died.
        worker: who runs it: ``{"host", "pid"}`` and, on Ray, ``{"node_id", "actor_id"}``.
        logger: a structlog logger with ``run_id``, ``task_id`` and ``repeat`` bound.

    Calling the context itself is a no-op that logs its arguments at debug level, so that AgentScope solutions
    written as ``solve(task, pre_print_hook)`` run unchanged.
    """

    run_id: str
    task_id: str
    repeat: int
    attempt: int = 1
    worker: dict[str, Any] = field(default_factory=dict)
    logger: Any = None

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        if self.logger is not None:
            self.logger.debug("solution.hook", args=[repr(a)[:200] for a in args])


def solution_factory(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Mark ``fn`` as a factory: called once per worker, it returns the solution callable.

    Example::

        @solution_factory
        def my_agent(model: str):
            client = load_model(model)          # once per worker
            async def solve(task):
                return await client.answer(task.input)
            return solve
    """
    setattr(fn, _FACTORY_MARK, True)
    return fn


def describe(target: Any) -> str:
    """``module:qualname`` of a callable or class (for fingerprints and messages); a string is returned as is."""
    if isinstance(target, str):
        return target
    module = getattr(target, "__module__", None) or type(target).__module__
    name = getattr(target, "__qualname__", None) or type(target).__qualname__
    return f"{module}:{name}"


ARGUMENT_FLAGS = {"model": "--model (provider:model, e.g. openai:gpt-4o)", "user_model": "--user-model"}
"""How a user passes a recipe's argument from the command line, where it has a flag of its own (else ``-S``)."""


@dataclass
class SolutionSpec:
    """A picklable recipe for a solution: the target (callable, class or factory) and its arguments.

    It pickles with the Python modules of the target's folder when that is no installed package (a ``--solution
    module:function`` of a local file), ahead of the target: a worker that lacks the folder imports the target and
    the modules beside it that it imports from there (:mod:`runner.core.local_code`).

    Args:
        target: a solution callable, a class, or a :func:`solution_factory`.
        kwargs: arguments for a class or factory (e.g. ``{"model": "openai:gpt-4o"}``); one it does not accept
            is an error.
        name: how the run names the solution (built-in name or import path).
    """

    target: Any
    kwargs: dict[str, Any] = field(default_factory=dict)
    name: str | None = None

    def __reduce_ex__(self, protocol: Any) -> str | tuple[Any, ...]:
        # The folder's code first: unpickling it puts its modules within reach before the target is imported.
        return with_code(super().__reduce_ex__(protocol), self.local_code())

    def local_code(self) -> LocalCode | None:
        """The modules of the folder of the target's module, that module the entry a worker imports at once
        (:func:`runner.core.local_code.code_of_module`); ``None`` for a target of the runner, of an installed
        package, or of ``__main__``."""
        return code_of_module(getattr(self.target, "__module__", None))

    @property
    def is_recipe(self) -> bool:
        """Whether :meth:`build` constructs something (a class or a factory) rather than using the target as is."""
        return inspect.isclass(self.target) or bool(getattr(self.target, _FACTORY_MARK, False))

    def accepts(self, name: str) -> bool:
        """Whether the target is a recipe whose arguments' model (:func:`runner.core.plugin.arguments_model`: its
        constructor's keyword arguments, all with ``**kwargs``) has the argument ``name`` (e.g. ``model``)."""
        return self.is_recipe and not plugin.unknown_arguments(self.target, [name])

    @property
    def in_process_providers(self) -> tuple[str, ...]:
        """Providers whose models the target loads in its own process rather than calling a server, as it declares
        (:func:`runner.core.plugin.declare`; e.g. ``("transformers",)`` for lm-eval's ``HFLM``): the run starts no
        replica of the agent's model of such a provider."""
        return plugin.declaration(self.target).in_process_providers

    @property
    def display(self) -> str:
        """The solution's name for messages."""
        return self.name or describe(self.target)

    def check(self) -> None:
        """Refuse arguments the target cannot take, and a recipe's required argument that is missing
        (``benchmark`` aside, which :meth:`build` passes).

        A recipe may also define ``check_arguments(**kwargs)`` (a static or class method raising ``ConfigError``):
        it is called here with the arguments, so that a bad value is reported before anything is written rather
        than when each worker builds the solution. Then every argument is validated against the recipe's arguments'
        model (:func:`runner.core.plugin.mistyped_arguments`, pydantic's lax mode), so ``-S temperature=hot`` is
        refused here too.

        Raises:
            ConfigError: naming the argument and the way out.
        """
        if self.is_recipe:
            missing = signature.missing_required(self.target, {*self.kwargs, "benchmark"})
            if missing:
                flags = " and ".join(ARGUMENT_FLAGS.get(name, f"-S {name}=VALUE") for name in missing)
                raise ConfigError(f"solution {self.display!r} needs {flags}")
        if not self.kwargs:
            return
        if not self.is_recipe:
            raise ConfigError(
                f"solution {self.display!r} is a plain function and takes no arguments "
                f"({', '.join(sorted(self.kwargs))}); drop them or make it a class or @solution_factory"
            )
        rejected = plugin.unknown_arguments(self.target, self.kwargs)
        if rejected:
            raise ConfigError(
                f"solution {self.display!r} does not accept {', '.join(sorted(rejected))}; "
                f"drop {'it' if len(rejected) == 1 else 'them'} or use a solution that does"
            )
        check_arguments = getattr(self.target, "check_arguments", None)
        if callable(check_arguments):
            check_arguments(**self.kwargs)
        for name, problem in plugin.mistyped_arguments(self.target, self.kwargs).items():
            raise ConfigError(
                f"solution {self.display!r}: argument {name}={self.kwargs[name]!r} {problem}; "
                f"fix -S {name}=VALUE (or the config's solution_args)"
            )

    def build(self, benchmark: BenchmarkBase | None = None) -> Callable[..., Any]:
        """Construct the solution callable (once per worker): the target itself, or what the recipe returns.

        Raises:
            ConfigError: arguments the target does not accept (see :meth:`check`).
            PluginError: the recipe built something that is not callable.
            Exception: whatever the recipe's constructor raises.
        """
        self.check()
        if not self.is_recipe:
            return self.target
        offered = dict(self.kwargs)
        if benchmark is not None and "benchmark" in plugin.declaration(self.target).needs:
            offered.setdefault("benchmark", benchmark)
        built = self.target(**offered)
        if not callable(built):
            raise PluginError(f"solution {self.display!r} built a {type(built).__name__}, which is not callable")
        return built
