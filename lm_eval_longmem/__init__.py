"""lm-eval-longmem: long-context memory evaluations for EleutherAI's lm-evaluation-harness.

Importing this package is cheap on purpose (the `.pth` start-up hook imports
`lm_eval_longmem._autoload` in every Python process); heavy imports live in the
submodules that need them.
"""

__version__ = "0.1.0"

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at every start-up (the `.pth` hook)
if TYPE_CHECKING:
    from lm_eval.tasks import TaskManager


def task_manager(**kwargs) -> "TaskManager":
    """A `lm_eval.tasks.TaskManager` that knows our tasks, for `lm_eval.simple_evaluate`.

    Keyword arguments go to `TaskManager` unchanged (e.g. `metadata=`, `include_path=`);
    our task directory is added whether or not the start-up hook is active::

        import lm_eval, lm_eval_longmem
        from lm_eval_longmem.common.evaluations import names
        tm = lm_eval_longmem.task_manager(metadata={"pretrained": "HuggingFaceTB/SmolLM2-135M"})
        lm_eval.simple_evaluate(model="hf", model_args="pretrained=HuggingFaceTB/SmolLM2-135M",
                                tasks=list(names()), task_manager=tm)

    Pass the same model arguments in `metadata` that you give the model: the harness
    only merges `model_args` into the metadata when it builds the TaskManager itself.
    It also lets `lm_eval_longmem.harness.models.live_backend()` see the model `simple_evaluate` creates,
    and checks our tasks' inputs before that model loads (`lm_eval_longmem.preflight`).
    """
    from lm_eval_longmem.common.evaluations import refused_folders, task_folders
    from lm_eval_longmem.harness import Plugin, install
    from lm_eval_longmem.harness.tasks import new_task_manager
    from lm_eval_longmem.preflight import check_run

    install(Plugin(before_model=check_run, task_folders=task_folders, refused_folders=refused_folders))
    return new_task_manager(**kwargs)
