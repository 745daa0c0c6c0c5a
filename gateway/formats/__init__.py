"""Wire formats other than Chat Completions, each translated to and from the chat body the pipeline sees."""
