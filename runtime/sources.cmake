# The runtime's and the command line's source lists, in one place: the build
# (runtime/CMakeLists.txt) and the arm64 cross build (tests/arm/) read them.
# Paths are relative to runtime/.
set(HALFORMER_RUNTIME_SOURCES
  src/build_info.cpp
  src/config.cpp
  src/decode.cpp
  src/decoding/search.cpp
  src/description.cpp
  src/device.cpp
  src/device_context.cpp
  src/fault.cpp
  src/files.cpp
  src/forward.cpp
  src/hf/hf_config.cpp
  src/hf/hf_weights.cpp
  src/packed.cpp
  src/halide_hooks.cpp
  src/json.cpp
  src/layers/attention.cpp
  src/layers/embedding.cpp
  src/layers/feed_forward.cpp
  src/layers/linear.cpp
  src/layers/norm.cpp
  src/layers/output_head.cpp
  src/layers/residual.cpp
  src/layers/rows.cpp
  src/layers/transformer_layer.cpp
  src/translation_quality.cpp
  src/params.cpp
  src/safetensors.cpp
  src/text_stream.cpp
  src/session.cpp
  src/text.cpp
  src/text/byte_level_bpe.cpp
  src/text/hf_tokenizers.cpp
  src/text/unicode.cpp
  src/text/wordpiece.cpp
  src/tokenizer.cpp
  src/utf8.cpp
  src/weights.cpp)
set(HALFORMER_TRAINING_SOURCES
  src/train/batch.cpp
  src/train/checkpoints.cpp
  src/train/data.cpp
  src/train/distributed.cpp
  src/train/optimizer.cpp
  src/train/parameters.cpp
  src/train/stack_passes.cpp
  src/train/training_loop.cpp)
# Commands every build has; serve and train are added where the build has them.
set(HALFORMER_CLI_SOURCES
  cli/halformer.cpp
  cli/common.cpp
  cli/info.cpp
  cli/logits.cpp
  cli/generate.cpp
  cli/demo.cpp
  cli/bench.cpp
  cli/tune.cpp
  cli/tokenizer.cpp
  cli/translate.cpp
  cli/eval.cpp
  cli/embed.cpp
  cli/classify.cpp
  cli/fill_mask.cpp)
set(HALFORMER_CLI_SERVER_SOURCES cli/serve.cpp)
set(HALFORMER_CLI_TRAINING_SOURCES cli/train.cpp)
