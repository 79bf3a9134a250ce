"""Memory: core memory blocks, the assembled context, embeddings and archival search."""
