#!/usr/bin/env bash
# Installs the Debian 12 packages partplan needs, skipping those present.
#
#   tools/install_deps.sh              # build and test dependencies
#   tools/install_deps.sh --python     # plus the Python tooling (torch.fx, grpcio)
#   tools/install_deps.sh --build-only # only what building the server needs (the image)
#   tools/install_deps.sh --fuzz       # plus clang and libFuzzer (tools/fuzz.sh)
#
# Needs root (or sudo) only when something is missing.
set -euo pipefail

packages=(
  bazel-bootstrap bazel-platforms g++ python3
  protobuf-compiler libprotobuf-dev protobuf-compiler-grpc libgrpc++-dev libgrpc-dev grpc-proto
  libabsl-dev libspdlog-dev libfmt-dev prometheus-cpp-dev
)
if [[ "${1:-}" != "--build-only" ]]; then
  packages+=(
    libgtest-dev libgmock-dev libbenchmark-dev
    openssl      # tests/server: certificates for the TLS tests
    python3-yaml # tests/deploy: reading the rendered manifests
  )
  # tests/deploy renders the manifests with `kubectl kustomize`. Debian's
  # kubectl is in kubernetes-client; keep any kubectl already installed.
  if ! command -v kubectl >/dev/null; then
    packages+=(kubernetes-client)
  fi
fi
if [[ "${1:-}" == "--fuzz" ]]; then
  # libFuzzer, ASan and UBSan runtimes for clang 14, and llvm-symbolizer for
  # readable sanitizer stacks.
  packages+=(clang libclang-rt-14-dev llvm-14)
fi
if [[ "${1:-}" == "--python" ]]; then
  packages+=(python3-torch python3-torchvision python3-grpcio python3-protobuf
    python3-venv # `pip install ./client/python` in a venv, and its test (test_install.py)
    chromium     # client/python/tests/test_report.py renders the plan reports headless
    python3-nbconvert python3-ipykernel  # test_install.py runs the quickstart notebook
  )
fi

missing=()
for package in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed"; then
    missing+=("$package")
  fi
done
if [[ ${#missing[@]} -eq 0 ]]; then
  exit 0
fi

echo "installing: ${missing[*]}" >&2
sudo=()
if [[ $(id -u) -ne 0 ]]; then
  sudo=(sudo)
fi
"${sudo[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
