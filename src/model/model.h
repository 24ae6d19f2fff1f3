// A loaded model: configuration, weights (views into the mapped GGUF file) and the forward pass
// over a batch of tokens from any number of sequences. Architectures register in registry.cpp.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "core/dtype.h"
#include "kv/kv_storage.h"
#include "model/batch.h"
#include "model/model_config.h"

namespace lumen {

class GgufFile;
class StepProfile;
class ThreadPool;

struct ModelOptions {
  int n_threads = 0;          // 0: all hardware threads
  int64_t n_batch = 512;      // most tokens one forward() call may take
  // F16 weight matrices computed as BF16 (rounded once at load; activations rounded to BF16;
  // vdpbf16ps at twice the FP32 FMA rate): about 2x faster prefill, but BF16 accuracy instead
  // of llama.cpp's F16 results. Needs the AVX-512 kernels (BF16); an error otherwise.
  bool f16_as_bf16 = false;
  // The thread pool the forward pass runs on, shared by every model of one engine (a draft
  // model beside its target must not spin a second pool on the same cores). Null: the model
  // makes its own with n_threads threads.
  std::shared_ptr<ThreadPool> pool;
  // The most tokens one sequence will hold (the context size per sequence); 0: the default,
  // default_context_length(). LongRoPE files (Phi-3 128k, Phi-4-mini) choose their long RoPE
  // factors by it, as llama.cpp does with its n_ctx per sequence.
  int64_t n_ctx_seq = 0;
};

// The context per sequence when none is asked for: the training context, at most 4096 tokens.
inline int64_t default_context_length(int64_t n_ctx_train) { return n_ctx_train < 4096 ? n_ctx_train : 4096; }

class Model {
 public:
  virtual ~Model() = default;

  // Loads the architecture named by general.architecture; Error for an unknown one, or for a
  // missing or misshapen tensor (naming it).
  static std::unique_ptr<Model> load(std::shared_ptr<const GgufFile> file, const ModelOptions& options = {});

  const ModelConfig& config() const { return config_; }
  const GgufFile& file() const { return *file_; }
  int64_t n_batch() const { return options_.n_batch; }

  ThreadPool& pool() const { return *options_.pool; }
  const std::shared_ptr<ThreadPool>& shared_pool() const { return options_.pool; }

  // The shape of this model's KV rows, for a KvStorage (K and V element types independent).
  KvLayout kv_layout(GgmlType k_type = GgmlType::F16, GgmlType v_type = GgmlType::F16, int32_t block_size = 16) const;

  // Evaluates the batch: writes each token's K/V rows to its slot in `kv`, then attends over
  // its sequence's block table. Writes n_vocab logits for each token with want_logits set, in
  // batch order, to `logits` (batch.n_outputs() x n_vocab floats). The model makes no cache
  // decisions (no truncation, no lengths): the batch says where everything is.
  // Errors: a batch larger than n_batch, a token id outside the vocabulary, or a batch whose
  // positions, slots and block tables do not agree (or point outside `kv`).
  virtual void forward(const Batch& batch, KvStorage& kv, float* logits) = 0;

  // Bytes of weights read per decoded token (for bandwidth figures).
  virtual size_t weight_bytes() const = 0;

  // Each forward() step's time and work go to `profile` (core/step_profile.h) until this is
  // called again with null; never while a forward() runs. The profile must outlive its use.
  void set_profile(StepProfile* profile) { profile_ = profile; }

 protected:
  Model(std::shared_ptr<const GgufFile> file, ModelConfig config, ModelOptions options)
      : file_(std::move(file)), config_(std::move(config)), options_(options) {}
  std::shared_ptr<const GgufFile> file_;
  ModelConfig config_;
  ModelOptions options_;
  StepProfile* profile_ = nullptr;
};

}  // namespace lumen
