"""Deep agents that run prioritylab's samplers: TD3 and SAC (MuJoCo), the DQN family (Atari).

Imports the core (samplers, replay, losses); nothing in the core imports it.
"""

from .sparse_pendulum import register as _register_sparse_pendulum

_register_sparse_pendulum()  # NERS's sparse Pendulum as a gymnasium id (prioritylab/SparsePendulum-v1)
