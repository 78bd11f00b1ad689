"""Generates C++ (and gRPC) code from .proto files with Debian's protoc.

Bazel 4.2.3 offline has no usable proto rules, so a genrule runs
/usr/bin/protoc with /usr/bin/grpc_cpp_plugin and a cc_library compiles the
result. Usage:

    cc_proto_codegen(
        name = "service_cc",
        srcs = ["partplan/v1/graph.proto"],   # paths below `proto_root`
        proto_root = "proto",                  # this package: the -I directory
        grpc_srcs = ["partplan/v1/planner_service.proto"],
    )

Sources are given relative to `proto_root`, which must be this package's
directory, and are included as "<src>.pb.h".
"""

def _strip(path):
    return path[:-len(".proto")]

def cc_proto_codegen(
        name,
        srcs,
        proto_root,
        grpc_srcs = [],
        import_dirs = [],
        proto_deps = [],
        deps = [],
        testonly = False,
        visibility = None):
    """Declares `name` (messages) and, with grpc_srcs, `name`_grpc (services).

    Args:
      name: the cc_library's name.
      srcs: .proto files (relative to proto_root) to generate messages for.
      proto_root: workspace-relative directory the imports are relative to.
      grpc_srcs: those of `srcs` that also declare services.
      import_dirs: further -I directories (e.g. for imported protos).
      proto_deps: labels of imported .proto files (made inputs of protoc).
      deps: cc deps of the generated code (other cc_proto_codegen libraries).
      testonly: whether only tests may depend on the code.
      visibility: of the cc_library.
    """
    if proto_root != native.package_name():
        fail("cc_proto_codegen: proto_root must be this package's directory")

    outs = [_strip(s) + ext for s in srcs for ext in [".pb.h", ".pb.cc"]]
    outs += [_strip(s) + ext for s in grpc_srcs for ext in [".grpc.pb.h", ".grpc.pb.cc"]]

    includes = " ".join(["-I" + d for d in [proto_root] + import_dirs + ["/usr/include"]])
    out_dir = "$(GENDIR)/" + proto_root
    cmd = "/usr/bin/protoc {inc} --cpp_out={out} {srcs}".format(
        inc = includes,
        out = out_dir,
        srcs = " ".join([proto_root + "/" + s for s in srcs]),
    )
    if grpc_srcs:
        cmd += " && /usr/bin/protoc {inc} --plugin=protoc-gen-grpc=/usr/bin/grpc_cpp_plugin --grpc_out={out} {srcs}".format(
            inc = includes,
            out = out_dir,
            srcs = " ".join([proto_root + "/" + s for s in grpc_srcs]),
        )

    native.genrule(
        name = name + "_codegen",
        srcs = srcs + proto_deps,
        outs = outs,
        cmd = cmd,
        testonly = testonly,
    )
    # Messages alone (protobuf only), so that pure libraries such as
    # //planner do not link gRPC; services in `<name>_grpc`.
    pb_cc = [_strip(s) + ".pb.cc" for s in srcs]
    pb_h = [_strip(s) + ".pb.h" for s in srcs]
    native.cc_library(
        name = name,
        srcs = pb_cc,
        hdrs = pb_h,
        includes = ["."],
        deps = deps + ["@system//:protobuf"],
        testonly = testonly,
        visibility = visibility,
    )
    if grpc_srcs:
        native.cc_library(
            name = name + "_grpc",
            srcs = [_strip(s) + ".grpc.pb.cc" for s in grpc_srcs],
            hdrs = [_strip(s) + ".grpc.pb.h" for s in grpc_srcs],
            includes = ["."],
            deps = [":" + name, "@system//:grpc"],
            testonly = testonly,
            visibility = visibility,
        )
