# CPU image by default; for CUDA:
#   docker build --build-arg BASE_IMAGE=nvidia/cuda:12.6.3-cudnn-runtime-ubuntu24.04 \
#                --build-arg TORCH_INDEX=https://download.pytorch.org/whl/cu126 \
#                --build-arg EXTRAS=server,gpu -t atomistic:cuda .
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ARG TORCH_INDEX=https://download.pytorch.org/whl/cpu
ARG TORCH_VERSION=2.13.0
ARG EXTRAS=server

ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 \
    ATOMISTIC_CHECKPOINTS=/app/checkpoints

# g++ builds the fused CPU kernel (atomistic/kernels/csrc) once, below
RUN apt-get update && apt-get install -y --no-install-recommends g++ \
    && if ! command -v python3 >/dev/null; then \
        apt-get install -y --no-install-recommends python3 python3-pip python3-venv python3-dev; \
    fi \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH

WORKDIR /app
RUN pip install "torch==${TORCH_VERSION}" --index-url "${TORCH_INDEX}"
COPY pyproject.toml README.md ./
COPY atomistic ./atomistic
COPY server ./server
RUN pip install ".[${EXTRAS}]"
COPY checkpoints ./checkpoints

RUN useradd --create-home atomistic
USER atomistic
# compile the fused CPU convolution now (cached in the user's torch_extensions folder), so the
# server's first start does not; a machine without a compiler falls back to "reference"
RUN python -c "from atomistic.kernels.cpu_fused import extension_builds; print('cpu kernel:', extension_builds())"
ENTRYPOINT ["atomistic"]
EXPOSE 8000
ENV ATOMISTIC_HOST=0.0.0.0
CMD ["serve"]
