"""The lab: experiments on the model that :mod:`prenorm_lib` builds.

- corpora: :mod:`~prenorm_lib.lab.data` (a generated grammar with long-range agreement)
  and :mod:`~prenorm_lib.lab.prose` (English prose of the Python documentation, by byte);
- :mod:`~prenorm_lib.lab.train`: the one training loop, and what a run's outcome is;
- :mod:`~prenorm_lib.lab.probes`: measurements inside a model (gradients, residual stream,
  attention logits, agreement accuracy);
- :mod:`~prenorm_lib.lab.timing`: fair speed comparisons (interleaved, paired, with spread);
- :mod:`~prenorm_lib.lab.experiments`: runs too long for a notebook, stored as records in
  ``prenorm_lib/lab/experiments/results/`` (shipped with the package);
- :mod:`~prenorm_lib.lab.figures`, :mod:`~prenorm_lib.lab.plotting`,
  :mod:`~prenorm_lib.lab.sliders`: every picture and slider of the notebooks;
- :mod:`~prenorm_lib.lab.reproducible`: ``setup()``, the first call of every notebook.

The lab imports the model; it never imports :mod:`prenorm_course`.
"""
