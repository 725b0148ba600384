# Sourced by scripts/gpu_check.sh and scripts/gpu_train.sh: the Python set-up of a GPU machine
# that has a CUDA build of torch but perhaps no internet. After `source scripts/gpu_env.sh`:
#   PY          the interpreter (PYTHON, default python3)
#   .whl/       when it holds wheels: the project's packages that machine lacks (one version of
#               each, without their dependencies), installed with --no-deps into /tmp/site, which
#               goes first on PYTHONPATH; the system's torch and site-packages stay untouched
#   .whl-peer/  when it exists: every later pip (the mace-torch virtualenv that
#               scripts/bench_inference.py builds) installs from it alone (PIP_NO_INDEX,
#               PIP_FIND_LINKS). Peer wheels (mace-torch, e3nn 0.4.4 ...) live apart from .whl/:
#               two versions of one package there would stop the install.
# and the checkout itself is importable (PYTHONPATH) where atomistic is not installed.
# Wheels for Python 3.12 on x86-64 Linux, from a machine with internet:
#   python3 -m pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#       --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
#       -d .whl ase vesin e3nn opt-einsum-fx
PY="${PYTHON:-python3}"
if [ -d .whl ] && ls .whl/*.whl > /dev/null 2>&1; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || {
        echo "gpu_env.sh: installing .whl/*.whl into /tmp/site failed" >&2
        return 1 2> /dev/null || exit 1
    }
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
if [ -d .whl-peer ]; then
    export PIP_NO_INDEX=1 PIP_FIND_LINKS="$PWD/.whl-peer"
fi
"$PY" -c "import atomistic" 2> /dev/null || export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
