"""The sources of a package, for the checks in //tests/architecture."""

def layering_sources():
    """A filegroup `sources` of the package's .h and .cc files."""
    native.filegroup(
        name = "sources",
        srcs = native.glob(["*.h", "*.cc"]),
        visibility = ["//tests/architecture:__pkg__"],
    )
