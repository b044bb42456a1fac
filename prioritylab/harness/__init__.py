"""Experiment harness: reports built from run folders."""
