"""Exact cosine search over an in-memory float32 matrix, appended to in place.

100k x 384 rows is ~150 MB and one matrix-vector product (~5-9 ms here): exact search
meets the latency target without an ANN index, as long as the matrix is loaded once and
grown on insert rather than rebuilt per query.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from stateloop.store.errors import EmbeddingMismatchError


@dataclass(slots=True)
class VectorHit:
    id: str
    score: float  # cosine similarity, -1..1


class VectorIndex:
    """Normalised rows plus ids, tags and timestamps; exact top-k with filters."""

    def __init__(self, dim: int, model: str | None = None, *, capacity: int = 1024) -> None:
        self.dim = dim
        self.model = model
        self._matrix = np.zeros((capacity, dim), dtype=np.float32)
        self._created = np.zeros(capacity, dtype=np.float64)
        self._alive = np.zeros(capacity, dtype=bool)
        self._ids: list[str] = []
        self._row_of: dict[str, int] = {}
        self._tag_rows: dict[str, list[int]] = {}
        self.loaded_until = 0  # every stored row up to this seq is in the index
        self._dead = 0

    def __len__(self) -> int:
        return len(self._ids) - self._dead

    def __contains__(self, passage_id: object) -> bool:
        return passage_id in self._row_of

    def _grow(self, needed: int) -> None:
        capacity = self._matrix.shape[0]
        if needed <= capacity:
            return
        new = max(needed, capacity * 2)
        # Doubling keeps appends amortised O(1); one copy per doubling, never per query.
        matrix = np.zeros((new, self.dim), dtype=np.float32)
        matrix[:capacity] = self._matrix
        self._matrix = matrix
        self._created = np.concatenate([self._created, np.zeros(new - capacity)])
        self._alive = np.concatenate([self._alive, np.zeros(new - capacity, dtype=bool)])

    def add(self, ids: Sequence[str], vectors: Any, *, tags: Sequence[Iterable[str]] | None = None,
            created_at: Sequence[float] | None = None) -> None:
        """Append rows; vectors are normalised here. Re-adding an id replaces it."""
        arr = np.asarray(vectors, dtype=np.float32).reshape(len(ids), -1) if len(ids) else None
        if arr is None:
            return
        if arr.shape[1] != self.dim:
            raise EmbeddingMismatchError(
                f"vectors have {arr.shape[1]} dims; this index ({self.model!r}) has {self.dim}")
        self.remove([i for i in ids if i in self._row_of])
        start = len(self._ids)
        self._grow(start + len(ids))
        norms = np.linalg.norm(arr, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        self._matrix[start:start + len(ids)] = arr / norms
        self._alive[start:start + len(ids)] = True
        if created_at is not None:
            self._created[start:start + len(ids)] = created_at
        for offset, passage_id in enumerate(ids):
            row = start + offset
            self._ids.append(passage_id)
            self._row_of[passage_id] = row
            for tag in (tags[offset] if tags is not None else ()):
                self._tag_rows.setdefault(tag, []).append(row)

    def remove(self, ids: Iterable[str]) -> None:
        """Forget rows (their slots are skipped by search)."""
        for passage_id in ids:
            row = self._row_of.pop(passage_id, None)
            if row is not None and self._alive[row]:
                self._alive[row] = False
                self._dead += 1

    def _candidates(self, tags: Sequence[str] | None, match: str,
                    start: float | None, end: float | None) -> np.ndarray | None:
        """A boolean mask of rows passing the filters, or None for "every live row"."""
        n = len(self._ids)
        mask: np.ndarray | None = None
        if self._dead:
            mask = self._alive[:n].copy()
        if tags:
            if match not in ("any", "all"):
                raise ValueError(f"tag_match_mode must be 'any' or 'all', not {match!r}")
            tag_mask = np.zeros(n, dtype=bool) if match == "any" else np.ones(n, dtype=bool)
            for tag in set(tags):
                rows = np.zeros(n, dtype=bool)
                rows[self._tag_rows.get(tag, [])] = True
                tag_mask = tag_mask | rows if match == "any" else tag_mask & rows
            mask = tag_mask if mask is None else mask & tag_mask
        if start is not None or end is not None:
            created = self._created[:n]
            time_mask = np.ones(n, dtype=bool)
            if start is not None:
                time_mask &= created >= start
            if end is not None:
                time_mask &= created <= end
            mask = time_mask if mask is None else mask & time_mask
        return mask

    def search(self, query: Any, top_k: int = 10, *, tags: Sequence[str] | None = None,
               tag_match_mode: str = "any", start: float | None = None,
               end: float | None = None) -> list[VectorHit]:
        """The ``top_k`` rows most similar to ``query`` that pass the filters, best first."""
        q = np.asarray(query, dtype=np.float32).reshape(-1)
        if q.shape[0] != self.dim:
            raise EmbeddingMismatchError(
                f"query has {q.shape[0]} dims; this index ({self.model!r}) has {self.dim}")
        norm = float(np.linalg.norm(q))
        if norm:
            q = q / norm
        n = len(self._ids)
        if n == 0 or top_k <= 0:
            return []
        mask = self._candidates(tags, tag_match_mode, start, end)
        if mask is None:
            rows = None
            scores = self._matrix[:n] @ q
        else:
            rows = np.flatnonzero(mask)
            if rows.size == 0:
                return []
            # A selective filter scores only its rows; a loose one scores all, then masks.
            if rows.size < n // 4:
                scores = self._matrix[rows] @ q
            else:
                scores = np.where(mask, self._matrix[:n] @ q, -np.inf)
                rows = None
        k = min(top_k, scores.shape[0])
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.argsort(-scores[best], kind="stable")]
        hits = []
        for i in best:
            score = float(scores[i])
            if score == -np.inf:
                break
            row = int(i) if rows is None else int(rows[i])
            hits.append(VectorHit(self._ids[row], score))
        return hits
