// GgufWriter: builds a GGUF version 3 file (little-endian) from metadata and tensors, and writes
// it atomically (PATH.tmp, then rename). Values are encoded when they are added, so a GgufValue
// whose strings are views (e.g. into another GgufFile's mapping) need only live until add()
// returns. Tensor bytes are supplied three ways: an owned buffer, a pointer to caller-kept data,
// or a producer callback called while the file is written, so that `lumen quantize` can stream
// a multi-GB model tensor by tensor (or row block by row block) without holding it in memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "gguf/gguf_value.h"

namespace lumen {

class GgufFile;
struct GgufTensorInfo;

// Value constructors for add(). Strings are views: keep the text alive until add() returns.
GgufValue gguf_uint8(uint8_t v);
GgufValue gguf_int8(int8_t v);
GgufValue gguf_uint16(uint16_t v);
GgufValue gguf_int16(int16_t v);
GgufValue gguf_uint32(uint32_t v);
GgufValue gguf_int32(int32_t v);
GgufValue gguf_uint64(uint64_t v);
GgufValue gguf_int64(int64_t v);
GgufValue gguf_float32(float v);
GgufValue gguf_float64(double v);
GgufValue gguf_bool(bool v);
GgufValue gguf_string(std::string_view v);
// An array; every item must have type `elem_type` (items of an ARRAY array are arrays
// themselves, each with its own element type).
GgufValue gguf_array(GgufType elem_type, std::vector<GgufValue> items);

// Where a producer writes one tensor's bytes, in order, in as many pieces as it likes.
// It must deliver exactly expected() bytes in total; more or fewer is an Error naming the tensor.
class GgufTensorSink {
 public:
  virtual ~GgufTensorSink() = default;
  virtual void write(const void* data, size_t n) = 0;
  virtual size_t written() const = 0;
  virtual size_t expected() const = 0;
};
using GgufTensorProducer = std::function<void(GgufTensorSink& out)>;

class GgufWriter {
 public:
  static constexpr size_t kDefaultAlignment = 32;

  GgufWriter() = default;

  // Adds a metadata entry, or replaces the value of an existing key in place (the key keeps its
  // position). Throws Error naming the key for an empty key, an array whose items do not match
  // its element type, arrays nested deeper than a reader accepts, or an integer out of range.
  // "general.alignment" must be an integer power of two up to 1 MiB (as the reader demands); it
  // sets the alignment of the tensor data.
  void add(std::string_view key, const GgufValue& value);
  bool remove(std::string_view key);  // false when absent
  bool has(std::string_view key) const;

  // Convenience setters (add() with the matching value type).
  void set_uint8(std::string_view key, uint8_t v) { add(key, gguf_uint8(v)); }
  void set_int8(std::string_view key, int8_t v) { add(key, gguf_int8(v)); }
  void set_uint16(std::string_view key, uint16_t v) { add(key, gguf_uint16(v)); }
  void set_int16(std::string_view key, int16_t v) { add(key, gguf_int16(v)); }
  void set_uint32(std::string_view key, uint32_t v) { add(key, gguf_uint32(v)); }
  void set_int32(std::string_view key, int32_t v) { add(key, gguf_int32(v)); }
  void set_uint64(std::string_view key, uint64_t v) { add(key, gguf_uint64(v)); }
  void set_int64(std::string_view key, int64_t v) { add(key, gguf_int64(v)); }
  void set_float32(std::string_view key, float v) { add(key, gguf_float32(v)); }
  void set_float64(std::string_view key, double v) { add(key, gguf_float64(v)); }
  void set_bool(std::string_view key, bool v) { add(key, gguf_bool(v)); }
  void set_string(std::string_view key, std::string_view v) { add(key, gguf_string(v)); }
  void set_strings(std::string_view key, const std::vector<std::string>& v);
  void set_int32s(std::string_view key, const std::vector<int32_t>& v);
  void set_float32s(std::string_view key, const std::vector<float>& v);
  // Sets general.alignment (as uint32).
  void set_alignment(size_t alignment);
  size_t alignment() const { return alignment_; }

  // Copies every metadata entry of `f` in file order (general.alignment included), replacing
  // keys already set. Later add() calls override single keys.
  void copy_metadata_from(const GgufFile& f);

  // Tensors, written in the order added. `ne` is in ggml order (ne[0] = row length), 1 to 4
  // dimensions. Throws Error naming the tensor for a duplicate or empty name, a bad shape, a row
  // length that is not a multiple of the type's block size, or bytes of the wrong size.
  void add_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne,
                  std::vector<uint8_t> data);
  // The bytes are read when the file is written: keep them alive and unchanged until then.
  void add_tensor_view(std::string_view name, GgmlType type, const std::vector<int64_t>& ne,
                       const void* data, size_t n_bytes);
  // The producer is called once per write, in tensor order, after the header and all earlier
  // tensors have been written.
  void add_tensor_streamed(std::string_view name, GgmlType type, const std::vector<int64_t>& ne,
                           GgufTensorProducer producer);
  // A view of a tensor of an open GgufFile (its mapping must outlive the write).
  void add_tensor_view(const GgufTensorInfo& t);

  size_t n_kv() const { return kv_.size(); }
  size_t n_tensors() const { return tensors_.size(); }
  // Bytes of the header (up to the aligned start of the data) and of the whole file.
  size_t header_size() const;
  size_t file_size() const;

  // Writes PATH.tmp, flushes it to disk and renames it to PATH. On any failure (I/O, a producer
  // that throws or delivers the wrong number of bytes) the temporary file is removed and an
  // Error is thrown; PATH is then untouched.
  void write(const std::string& path) const;
  // The whole file in memory (tests, fuzz seeds, small files).
  std::vector<uint8_t> to_bytes() const;

  class Output;  // internal: where write_all() sends the bytes (memory or a file)

 private:
  struct Kv {
    std::string key;
    std::vector<uint8_t> encoded;  // type id + value, little-endian
  };
  struct Tensor {
    std::string name;
    GgmlType type;
    std::vector<int64_t> ne;
    size_t n_bytes = 0;
    std::vector<uint8_t> owned;
    const uint8_t* view = nullptr;
    GgufTensorProducer producer;
  };
  Tensor& new_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne);
  // Tensor offsets relative to the data section, each aligned, given the current alignment.
  std::vector<uint64_t> layout(uint64_t* data_size) const;
  std::vector<uint8_t> encode_header() const;  // unpadded
  void write_all(Output& out) const;

  std::vector<Kv> kv_;
  std::vector<Tensor> tensors_;
  size_t alignment_ = kDefaultAlignment;
};

}  // namespace lumen
