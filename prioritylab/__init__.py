"""prioritylab: prioritized experience replay samplers, a Blind Cliffwalk testbed, deep agents."""

from .samplers import SAMPLERS, SampleBatch, Sampler, make_sampler
from .schedules import LinearSchedule
from .sumtree import SumTree

__version__ = "0.1.0"

__all__ = ["SAMPLERS", "LinearSchedule", "SampleBatch", "Sampler", "SumTree", "make_sampler", "__version__"]
