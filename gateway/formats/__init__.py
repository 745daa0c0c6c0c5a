"""Wire formats other than Chat Completions, translated to and from the chat body the pipeline assembles.

Each module is pure (dicts in, dicts out, no I/O), so ``assembly/`` only ever sees one shape.
"""
