#!/usr/bin/env bash
# Runs a Python test with Debian's interpreter (Bazel 4.2.3's py_test would
# need a Python toolchain): run_py_test.sh TEST.py [ARGS...]
exec /usr/bin/python3 -B "$@"
