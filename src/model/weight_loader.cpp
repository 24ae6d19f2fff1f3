#include "model/weight_loader.h"

#include "core/error.h"
#include "gguf/gguf_file.h"

namespace lumen {

bool WeightLoader::has(const std::string& name) const { return file_.find_tensor(name) != nullptr; }

const GgufTensorInfo& WeightLoader::get(const std::string& name) const {
  const GgufTensorInfo* t = file_.find_tensor(name);
  if (!t) fail("{}: missing tensor '{}'", file_.path(), name);
  if (used_) used_->insert(name);
  return *t;
}

WeightMatrix WeightLoader::matrix(const std::string& name, int64_t n_in, int64_t n_out) const {
  const GgufTensorInfo* t = &get(name);
  if (t->n_dims > 2 || t->ne[0] != n_in || t->ne[1] != n_out)
    fail("{}: tensor '{}' has shape {}, expected [{}, {}]", file_.path(), name, t->shape_string(), n_in, n_out);
  const TypeTraits& tr = type_traits(t->type);
  if (!tr.vec_dot || !tr.to_float)
    fail("{}: tensor '{}' has type {}, which lumen cannot compute with yet", file_.path(), name, tr.name);
  WeightMatrix w;
  w.type = t->type;
  w.n_in = n_in;
  w.n_out = n_out;
  w.data = t->data;
  w.row_bytes = row_size(t->type, n_in);
  return w;
}

WeightMatrix WeightLoader::matrix_rows(const std::string& name, int64_t n_in, int64_t n_out, int64_t first,
                                       int64_t n) const {
  LUMEN_ASSERT(first >= 0 && n > 0 && first + n <= n_out);
  WeightMatrix w = matrix(name, n_in, n_out);
  w.data = w.row(first);
  w.n_out = n;
  return w;
}

WeightMatrix WeightLoader::expert_matrix(const std::string& name, int64_t n_in, int64_t n_out, int64_t n_expert,
                                         int64_t e) const {
  const GgufTensorInfo* t = &get(name);
  // One expert's tensor may be stored 2-D (ggml writes no trailing dimension of 1).
  const int64_t n_stored = t->n_dims == 3 ? t->ne[2] : t->n_dims == 2 ? 1 : 0;
  if (t->n_dims < 2 || t->n_dims > 3 || t->ne[0] != n_in || t->ne[1] != n_out || n_stored != n_expert)
    fail("{}: tensor '{}' has shape {}, expected [{}, {}, {}]", file_.path(), name, t->shape_string(), n_in, n_out,
         n_expert);
  const TypeTraits& tr = type_traits(t->type);
  if (!tr.vec_dot || !tr.to_float)
    fail("{}: tensor '{}' has type {}, which lumen cannot compute with yet", file_.path(), name, tr.name);
  LUMEN_ASSERT(e >= 0 && e < n_expert);
  WeightMatrix w;
  w.type = t->type;
  w.n_in = n_in;
  w.n_out = n_out;
  w.row_bytes = row_size(t->type, n_in);
  w.data = t->data + static_cast<size_t>(e) * static_cast<size_t>(n_out) * w.row_bytes;
  return w;
}

const float* WeightLoader::vector(const std::string& name, int64_t n) const {
  const GgufTensorInfo* t = &get(name);
  if (t->n_elements() != n || t->ne[0] != n)
    fail("{}: tensor '{}' has shape {}, expected [{}]", file_.path(), name, t->shape_string(), n);
  if (t->type != GgmlType::F32)
    fail("{}: tensor '{}' has type {}, expected F32", file_.path(), name, type_name(t->type));
  if (reinterpret_cast<uintptr_t>(t->data) % alignof(float) != 0)
    fail("{}: tensor '{}' is not 4-byte aligned", file_.path(), name);
  return reinterpret_cast<const float*>(t->data);
}

}  // namespace lumen
