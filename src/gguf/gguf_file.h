// A GGUF file (versions 1, 2 and 3), memory-mapped. Every count, length, offset and type id is
// checked against the file before use; any malformed input throws lumen::Error with a message
// naming the file and the key or tensor at fault. Tensors are zero-copy views into the mapping.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/mapped_file.h"
#include "gguf/gguf_value.h"

namespace lumen {

constexpr int kGgufMaxDims = 4;

struct GgufTensorInfo {
  std::string name;
  int n_dims = 0;
  int64_t ne[kGgufMaxDims] = {1, 1, 1, 1};  // ggml order: ne[0] is the row length
  GgmlType type = GgmlType::F32;
  uint64_t offset = 0;       // relative to the data section
  const uint8_t* data = nullptr;  // into the mapping
  size_t n_bytes = 0;
  int64_t n_elements() const { return ne[0] * ne[1] * ne[2] * ne[3]; }
  int64_t n_rows() const { return ne[1] * ne[2] * ne[3]; }
  std::string shape_string() const;  // e.g. "[64, 512]"
};

class GgufFile {
 public:
  // Opens, maps and validates the whole header. Throws Error on any problem.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses an in-memory buffer (used by the fuzz target); `name` stands in for the path.
  static std::unique_ptr<GgufFile> parse(const uint8_t* data, size_t size, const std::string& name);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  size_t file_size() const { return size_; }
  size_t alignment() const { return alignment_; }
  size_t data_offset() const { return data_offset_; }

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return kv_; }
  const GgufValue* find(std::string_view key) const;
  // Typed lookups: nullopt when absent; Error (naming the file and key) when of the wrong type.
  std::optional<int64_t> get_int(std::string_view key) const;
  std::optional<double> get_float(std::string_view key) const;
  std::optional<bool> get_bool(std::string_view key) const;
  std::optional<std::string_view> get_string(std::string_view key) const;
  const std::vector<GgufValue>* get_array(std::string_view key) const;
  // Required variants: Error when absent.
  int64_t require_int(std::string_view key) const;
  std::string_view require_string(std::string_view key) const;

  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  void parse_all();

  std::unique_ptr<MappedFile> mapping_;
  std::string path_;
  const uint8_t* base_ = nullptr;
  size_t size_ = 0;
  uint32_t version_ = 0;
  size_t alignment_ = 32;
  size_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> kv_;
  std::map<std::string, size_t, std::less<>> kv_index_;
  std::vector<GgufTensorInfo> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

}  // namespace lumen
