"""The gateway: ingest, pipeline over encoder / decoder replicas, jobs, caches, REST and gRPC APIs."""
