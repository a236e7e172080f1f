"""Evaluating scorers against the human scores: the lm-eval runner, scored sentences from runs and prediction
files, agreement metrics with intervals, offline baselines, the report, the default model and the main job.
"""
