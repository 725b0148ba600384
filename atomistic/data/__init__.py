"""Structures in: conversion, validation, neighbour lists and batched graphs."""

from atomistic.data.convert import (
    LabelKeys,
    Structure,
    StructureError,
    UnsupportedFormatError,
    as_structure,
    parse_structures,
    read_structures,
    to_structures,
    validate_structure,
)
from atomistic.data.datasets import read_labelled, read_mlearn_json
from atomistic.data.graph import AtomicGraph, SpeciesMap, build_graph, split_results
from atomistic.data.neighbors import neighbor_list

__all__ = [
    "AtomicGraph",
    "LabelKeys",
    "SpeciesMap",
    "Structure",
    "StructureError",
    "UnsupportedFormatError",
    "as_structure",
    "build_graph",
    "neighbor_list",
    "parse_structures",
    "read_labelled",
    "read_mlearn_json",
    "read_structures",
    "split_results",
    "to_structures",
    "validate_structure",
]
