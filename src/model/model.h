// A loaded model: configuration, weights (views into the mapped GGUF file) and the forward pass
// over a batch of tokens from any number of sequences. Architectures register in registry.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "model/batch.h"
#include "model/model_config.h"

namespace lumen {

class GgufFile;
class KvCache;

struct ModelOptions {
  int n_threads = 0;          // 0: all hardware threads
  int64_t n_batch = 512;      // most tokens one forward() call may take
  // F16 weight matrices computed as BF16 (rounded once at load; activations rounded to BF16;
  // vdpbf16ps at twice the FP32 FMA rate): about 2x faster prefill, but BF16 accuracy instead
  // of llama.cpp's F16 results. Needs the AVX-512 kernels (BF16); an error otherwise.
  bool f16_as_bf16 = false;
};

class Model {
 public:
  virtual ~Model() = default;

  // Loads the architecture named by general.architecture; Error for an unknown one, or for a
  // missing or misshapen tensor (naming it).
  static std::unique_ptr<Model> load(std::shared_ptr<const GgufFile> file, const ModelOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return *file_; }
  int64_t n_batch() const { return options_.n_batch; }

  // A KV cache for this model: n_seq sequence slots of n_ctx positions each (F32 or F16).
  std::unique_ptr<KvCache> make_kv_cache(int64_t n_seq, int64_t n_ctx, GgmlType dtype = GgmlType::F32) const;

  // Evaluates the batch, appending K/V to the cache. Writes n_vocab logits for each token with
  // want_logits set, in batch order, to `logits` (batch.n_outputs() x n_vocab floats).
  // Errors: a batch larger than n_batch, a token id outside the vocabulary, a position past the
  // cache's context, or positions that do not continue their sequence.
  virtual void forward(const Batch& batch, KvCache& kv, float* logits) = 0;

  // Bytes of weights read per decoded token (for bandwidth figures).
  virtual size_t weight_bytes() const = 0;

 protected:
  Model(std::shared_ptr<const GgufFile> file, ModelConfig config, ModelOptions options)
      : file_(std::move(file)), config_(std::move(config)), options_(options) {}
  std::shared_ptr<const GgufFile> file_;
  ModelConfig config_;
  ModelOptions options_;
};

}  // namespace lumen
