"""inkstream decoder service: vision tokens in, streamed text out, with continuous batching.

Modules (each small and single-purpose):

* :mod:`~decoder_service.engine` - the engine seam: :class:`DecoderEngine` (what the servicer needs)
  and ``make_engine`` (``DecoderConfig.engine``: ``builtin`` = the scheduler below, ``vllm`` =
  :mod:`~decoder_service.vllm_engine`, vLLM's AsyncLLM over ``inkstream export-vllm``'s export, with
  the n-gram guard as a vLLM logits processor in :mod:`~decoder_service.vllm_guard`);
* :mod:`~decoder_service.scheduler` - :class:`DecodeEngine`, the continuous-batching engine over a
  :class:`models.base.DecoderHalf` (no gRPC); :mod:`~decoder_service.reference` - the slow
  one-sequence :func:`generate_one` it must agree with token for token;
* :mod:`~decoder_service.kv` (one left-padded batched KV cache), :mod:`~decoder_service.sampling`
  (greedy / temperature / top-k / top-p), :mod:`~decoder_service.repetition` (n-gram loop
  detector), :mod:`~decoder_service.stopping` (finish reasons), :mod:`~decoder_service.detok`
  (incremental detokenisation, whole characters only), :mod:`~decoder_service.metrics` (OTel);
* :mod:`~decoder_service.servicer` (grpc.aio ``TextDecoder``), :mod:`~decoder_service.convert`
  (the only module that touches decoder protobufs), :mod:`~decoder_service.server`
  (``build_server``), :mod:`~decoder_service.config` (settings), :mod:`~decoder_service.main`
  (``inkstream serve decoder``).

Decisions (DESIGN.md leaves these open):

* Own scheduler rather than transformers' ``ContinuousBatchingManager``: in the installed
  transformers 5.23 its ``add_request`` takes ``input_ids`` only, and the decoder's prompts are
  embeddings with vision tokens scattered in.
* Each newcomer is prefilled alone (batch 1, no padding) between decode steps and then merged into
  the batched KV cache; decode steps run all sequences at once with a padding mask and explicit
  per-row position ids, so batching never changes a greedy output (tested against ``generate_one``
  and against Hugging Face ``generate`` of the full model).
* Per-segment INVALID_ARGUMENT errors inside the stream; RESOURCE_EXHAUSTED / UNAVAILABLE abort the
  call with a retry hint (see :mod:`~decoder_service.servicer`).
* The EOS token, when it ends a sequence, is the last of its ``token_ids`` (as Hugging Face
  ``generate`` returns it); its text is empty.
"""
