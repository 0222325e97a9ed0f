r"""Sparse Hessians from few Hessian–vector products: greedy star colouring of the sparsity
graph and direct recovery of every entry (Meissner & Glasner 2024, §4.1, eq. 17; Gebremedhin, Manne & Pothen,
SIAM Review 47 (2005), §4).

A star colouring is a proper colouring in which every path on four vertices uses at least
three colours. Then for every off-diagonal non-zero $(i, j)$ of a symmetric matrix, column
$j$ is the only column of its colour with a non-zero in row $i$, or column $i$ the only one
of its colour in row $j$; so $H_{ij}$ is read off $H d_{c(j)}$ or $H d_{c(i)}$, with $d_k$
the indicator vector of colour $k$."""

import numpy as np


def star_colouring(indptr: np.ndarray, indices: np.ndarray) -> np.ndarray:
    r"""A greedy star colouring (natural vertex order) of the graph with adjacency lists
    `indices[indptr[v]:indptr[v + 1]]` (no self loops). Returns the colour of each vertex,
    from 0.

    Each vertex takes the least colour that keeps every path on four vertices through it
    at least three-coloured: besides its neighbours' colours it may not take the colour of
    $x$ on a path $v - w - x - y$ with $c(y) = c(w)$, nor, where two of its neighbours share
    a colour, the colour of any neighbour $x$ of those neighbours. Colour counts per vertex
    and colour make each test a vector operation."""
    n = len(indptr) - 1
    colour = np.full(n, -1, dtype=np.int64)
    degree = np.diff(indptr)
    # a greedy distance-2 colouring needs at most Δ² + 1 colours, and star colourings no more
    n_max = int(min(n, degree.max(initial=0) ** 2 + 1))
    count = np.zeros((n, n_max), dtype=np.int32)  # count[x, k]: coloured neighbours of x with colour k
    for v in range(n):
        nbrs = indices[indptr[v] : indptr[v + 1]]
        coloured = nbrs[colour[nbrs] >= 0]
        forbidden = np.zeros(n_max, dtype=bool)
        forbidden[colour[coloured]] = True
        shared = count[v] >= 2  # colours held by two or more neighbours of v
        for w in coloured:
            cw = colour[w]
            xs = indices[indptr[w] : indptr[w + 1]]
            xs = xs[(xs != v) & (colour[xs] >= 0)]
            if shared[cw]:  # u - v - w - x with c(u) = c(w): v may not take c(x)
                forbidden[colour[xs]] = True
            else:  # v - w - x - y with c(y) = c(w) (w itself counts once in count[x, c(w)])
                forbidden[colour[xs[count[xs, cw] >= 2]]] = True
        c = int(np.argmin(forbidden))
        colour[v] = c
        count[nbrs, c] += 1
    return colour


def is_star_colouring(indptr: np.ndarray, indices: np.ndarray, colour: np.ndarray) -> bool:
    """Whether `colour` is proper and every two-coloured path on four vertices is absent
    (brute force over paths; for tests on small graphs)."""
    n = len(indptr) - 1
    nbrs = [indices[indptr[v] : indptr[v + 1]] for v in range(n)]
    for v in range(n):
        if np.any(colour[nbrs[v]] == colour[v]):
            return False
    for a in range(n):
        for b in nbrs[a]:
            for c in nbrs[b]:
                if c == a or colour[c] != colour[a]:
                    continue
                for d in nbrs[c]:
                    if d != b and d != a and colour[d] == colour[b]:
                        return False
    return True


def recovery_indices(rows: np.ndarray, cols: np.ndarray, colour: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    r"""For each pattern entry $(i, j)$ (both triangles and the diagonal listed), the row
    and colour of the compressed product $H D$ that holds $H_{ij}$ alone: $(i, c(j))$ where
    $j$ is the only column of its colour in row $i$, else $(j, c(i))$. Raises where neither
    is unique (not a star colouring of this pattern)."""
    n_colours = int(colour.max()) + 1
    per_row = np.zeros((int(max(rows.max(), cols.max())) + 1, n_colours), dtype=np.int64)
    np.add.at(per_row, (rows, colour[cols]), 1)
    direct = per_row[rows, colour[cols]] == 1
    mirrored = per_row[cols, colour[rows]] == 1
    if not np.all(direct | mirrored):
        raise ValueError("the colouring is not a star colouring of the sparsity pattern.")
    return np.where(direct, rows, cols), np.where(direct, colour[cols], colour[rows])
