"""The sources of a package, for the checks in //tests/architecture."""

def layering_sources():
    """A filegroup `sources` of the package's .h and .cc files."""
    native.filegroup(
        name = "sources",
        srcs = native.glob(["*.h", "*.cc"]),
        visibility = ["//tests/architecture:__pkg__"],
    )

# Every package whose sources the checks read.
CHECKED_SOURCES = [
    "//planner/api:sources",
    "//planner/base:sources",
    "//planner/data_parallel:sources",
    "//planner/fx:sources",
    "//planner/graph:sources",
    "//planner/parallelize:sources",
    "//planner/pipeline:sources",
    "//planner/split:sources",
    "//planner/training:sources",
    "//planner/wire:sources",
    "//server:sources",
]
