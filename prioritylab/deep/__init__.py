"""Deep agents that run prioritylab's samplers: TD3 and SAC (MuJoCo), the DQN family (Atari).

Imports the core (samplers, replay, losses); nothing in the core imports it.
"""
