// Fetches weight tensors from a GGUF file by name, checking type support and shape, so a
// missing or misshapen tensor is an error that names it.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_set>

#include "kernels/matmul.h"

namespace lumen {

class GgufFile;
struct GgufTensorInfo;

// `used`, where given, collects the name of every tensor fetched (Decoder refuses a file with
// tensors its architecture never reads).
class WeightLoader {
 public:
  explicit WeightLoader(const GgufFile& file, std::unordered_set<std::string>* used = nullptr)
      : file_(file), used_(used) {}

  bool has(const std::string& name) const;
  // A 2-D matrix of n_out rows of n_in; its type must support matmul.
  WeightMatrix matrix(const std::string& name, int64_t n_in, int64_t n_out) const;
  // Rows [first, first + n) of a fused matrix of n_out rows of n_in (e.g. phi3's attn_qkv: Q, K
  // and V one after the other), as a matrix of its own: a view of those rows of the file.
  WeightMatrix matrix_rows(const std::string& name, int64_t n_in, int64_t n_out, int64_t first, int64_t n) const;
  // Expert e of a 3-D tensor of n_expert matrices of n_out rows of n_in (ggml's [n_in, n_out,
  // n_expert]: the experts one after the other), as a matrix of its own: a view.
  WeightMatrix expert_matrix(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert, int64_t e) const;
  // A 1-D F32 vector of n elements (norm weights, biases).
  const float* vector(const std::string& name, int64_t n) const;
  const float* optional_vector(const std::string& name, int64_t n) const {
    return has(name) ? vector(name, n) : nullptr;
  }

 private:
  const GgufTensorInfo& get(const std::string& name) const;  // fails naming a missing one

  const GgufFile& file_;
  std::unordered_set<std::string>* used_;
};

}  // namespace lumen
