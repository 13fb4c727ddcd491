"""resil from Python.

- resil.trial: a campaign trial as a Python function (checkpoint path in, metrics out), run by
  `ckpt-flip campaign` as a command or through a resident worker that imports torch, your module
  and your data once and forks each trial ("mode": "worker"; docs/guide/pytorch.md).
- resil.results: what resil writes (flip logs, campaign records, report JSON) as plain Python
  structures (docs/reference/python.md).

Pure Python, standard library only; importable from a checkout with PYTHONPATH=python.
"""

__all__ = ["results", "trial"]
