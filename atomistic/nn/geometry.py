"""Edge geometry from positions, cell and shifts (differentiable; no derivatives taken here)."""

from __future__ import annotations

import torch

from atomistic import keys
from atomistic.data.graph import AtomicGraph


def edge_vectors(graph: AtomicGraph) -> torch.Tensor:
    """``[n_edges, 3]`` Å: ``r_neighbour - r_centre + shift @ cell`` of each edge's system."""
    positions = graph[keys.POSITIONS]
    centre, neighbour = graph[keys.EDGE_INDEX][0], graph[keys.EDGE_INDEX][1]
    edge_system = graph[keys.SYSTEM_IDX][centre]
    shift_vectors = torch.einsum("ek,ekj->ej", graph[keys.EDGE_SHIFT], graph[keys.CELL][edge_system])
    return positions[neighbour] - positions[centre] + shift_vectors
