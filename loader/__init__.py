"""The loader: pours CRDs into a cluster at a controlled pace, and never damages it.

``sources`` (files, archives, stdin, another cluster) and ``synthetic``
(generated Crossplane-shaped CRDs) yield CRD documents; ``engine`` applies
them with server-side apply; ``safety`` decides what crdscope may touch and
cleans up; ``record`` keeps the journal that lets a stopped run finish later.
Like ``probes``, nothing here imports textual or rich.
"""
