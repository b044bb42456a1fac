"""prioritylab: prioritized experience replay samplers, a Blind Cliffwalk testbed, deep agents."""

from . import _kernel_cache
from .samplers import SAMPLERS, SampleBatch, Sampler, make_sampler
from .schedules import LinearSchedule
from .sumtree import SumTree, tree_update

# before any kernel runs: a kernel cached before an edit of a kernel it calls in another module is compiled again
_kernel_cache.refresh(tree_update)
del tree_update

__version__ = "0.1.0"

__all__ = ["SAMPLERS", "LinearSchedule", "SampleBatch", "Sampler", "SumTree", "make_sampler", "__version__"]
