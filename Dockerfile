# syntax=docker/dockerfile:1
# One image for every stage; the process is chosen by the command:
#   docker run IMAGE serve encoder --model /weights --host 0.0.0.0 --port 50051 --metrics-port 9464
#   docker run IMAGE serve decoder --model /weights --host 0.0.0.0 --port 50051 --metrics-port 9464
#   docker run IMAGE serve gateway --encoders HOST:50051 --decoders HOST:50051 --host 0.0.0.0 --port 8080
# Weights are never in the image: mount a checkpoint directory at /weights (read-only).
#
# Build: docker build -t inkstream:0.1.0 .
# CPU-only (smaller) image: docker build --build-arg TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu .

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

# ---- build: a wheel of inkstream (gRPC stubs generated from protos/ by setup.py) + dependency wheels
FROM ${PYTHON_IMAGE} AS build
ARG TORCH_INDEX_URL=""
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY protos/ protos/
COPY inkstream/ inkstream/
COPY models/ models/
COPY encoder_service/ encoder_service/
COPY decoder_service/ decoder_service/
COPY gateway/ gateway/
COPY launcher/ launcher/
COPY client/ client/
COPY evaluation/ evaluation/
# Stubs first: setuptools discovers packages before build_py runs, so in a clean checkout the
# generated inkstream/{common,encoder,decoder,gateway}/v1 packages must exist before `pip wheel`
# (otherwise the wheel silently lacks them; the grep below fails the build if that ever happens).
RUN pip install grpcio-tools==1.85.1 \
 && python inkstream/_protogen.py \
 && pip wheel --no-deps --wheel-dir /wheels . \
 && python -m zipfile -l /wheels/inkstream-*.whl | grep -q "inkstream/encoder/v1/encoder_pb2_grpc.py" \
 && if python -m zipfile -l /wheels/inkstream-*.whl | grep -q "\.safetensors"; then \
      echo "weights must not be packaged into the image" >&2; exit 1; fi
RUN pip wheel --wheel-dir /wheels ${TORCH_INDEX_URL:+--extra-index-url ${TORCH_INDEX_URL}} /wheels/inkstream-*.whl

# ---- runtime: slim Python, the wheels only, an unprivileged user
FROM ${PYTHON_IMAGE} AS runtime
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini libgomp1 \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 inkstream \
 && useradd --system --uid 10001 --gid 10001 --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin inkstream
RUN --mount=type=bind,from=build,source=/wheels,target=/wheels \
    pip install --no-cache-dir --no-index --find-links /wheels inkstream \
 && python -c "from inkstream.pb import encoder_pb2_grpc, decoder_pb2_grpc, gateway_pb2_grpc"
ENV PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HF_HOME=/tmp/hf \
    INKSTREAM_LOG_FORMAT=json
RUN mkdir -p /weights /var/lib/inkstream && chown 10001:10001 /var/lib/inkstream
VOLUME ["/weights"]
EXPOSE 8080 50051 9464
USER 10001:10001
WORKDIR /var/lib/inkstream
# tini (PID 1) forwards SIGTERM to inkstream, whose Lifecycle drains before exiting.
ENTRYPOINT ["/usr/bin/tini", "--", "inkstream"]
CMD ["--help"]
