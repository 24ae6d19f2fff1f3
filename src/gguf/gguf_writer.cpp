#include "gguf/gguf_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>
#include <limits>

#include "core/error.h"
#include "gguf/gguf_file.h"

namespace lumen {

namespace {

// Limits the reader enforces; the writer refuses to produce what it would refuse to read.
constexpr int kMaxArrayDepth = 8;
constexpr int64_t kMaxDim = int64_t{1} << 40;
constexpr size_t kMaxAlignment = size_t{1} << 20;
// ggml (llama.cpp) keeps tensor names in a 64-byte buffer, NUL included.
constexpr size_t kMaxTensorName = 63;

uint64_t align_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

class Encoder {
 public:
  explicit Encoder(std::vector<uint8_t>& out) : out_(out) {}
  template <class T>
  void put(T v) {
    const size_t at = out_.size();
    out_.resize(at + sizeof(T));
    std::memcpy(out_.data() + at, &v, sizeof(T));  // x86-64: already little-endian
  }
  void put_string(std::string_view s) {
    put<uint64_t>(s.size());
    out_.insert(out_.end(), s.begin(), s.end());
  }

 private:
  std::vector<uint8_t>& out_;
};

// Checks that an integer GgufValue's bits fit its declared type.
void check_range(const GgufValue& v, std::string_view key) {
  const auto s = static_cast<int64_t>(v.bits);
  bool ok = true;
  switch (v.type) {
    case GgufType::UINT8: ok = v.bits <= 0xff; break;
    case GgufType::UINT16: ok = v.bits <= 0xffff; break;
    case GgufType::UINT32: ok = v.bits <= 0xffffffffu; break;
    case GgufType::INT8: ok = s >= -128 && s <= 127; break;
    case GgufType::INT16: ok = s >= -32768 && s <= 32767; break;
    case GgufType::INT32:
      ok = s >= std::numeric_limits<int32_t>::min() && s <= std::numeric_limits<int32_t>::max();
      break;
    case GgufType::BOOL: ok = v.bits <= 1; break;
    default: break;
  }
  if (!ok)
    fail("GGUF writer: key '{}': value {} does not fit a {}", key,
         v.is_signed() ? fmt::format("{}", s) : fmt::format("{}", v.bits), gguf_type_name(v.type));
}

// The value without its own type id (as array items are stored).
void encode_payload(Encoder& e, const GgufValue& v, std::string_view key, int depth) {
  switch (v.type) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL:
      check_range(v, key);
      e.put(static_cast<uint8_t>(v.bits));
      break;
    case GgufType::UINT16: case GgufType::INT16:
      check_range(v, key);
      e.put(static_cast<uint16_t>(v.bits));
      break;
    case GgufType::UINT32: case GgufType::INT32:
      check_range(v, key);
      e.put(static_cast<uint32_t>(v.bits));
      break;
    case GgufType::UINT64: case GgufType::INT64: e.put(v.bits); break;
    case GgufType::FLOAT32: e.put(static_cast<float>(v.real)); break;
    case GgufType::FLOAT64: e.put(v.real); break;
    case GgufType::STRING: e.put_string(v.str); break;
    case GgufType::ARRAY: {
      if (depth >= kMaxArrayDepth)
        fail("GGUF writer: key '{}': arrays nested deeper than {}", key, kMaxArrayDepth);
      if (static_cast<uint32_t>(v.elem_type) >= kGgufTypeCount)
        fail("GGUF writer: key '{}': invalid array element type id {}", key,
             static_cast<uint32_t>(v.elem_type));
      e.put(static_cast<uint32_t>(v.elem_type));
      e.put<uint64_t>(v.items.size());
      for (size_t i = 0; i < v.items.size(); i++) {
        const GgufValue& item = v.items[i];
        if (item.type != v.elem_type)
          fail("GGUF writer: key '{}': array item {} is a {} in an array of {}", key, i,
               gguf_type_name(item.type), gguf_type_name(v.elem_type));
        encode_payload(e, item, key, depth + 1);
      }
      break;
    }
    default:
      fail("GGUF writer: key '{}': invalid value type id {}", key, static_cast<uint32_t>(v.type));
  }
}

template <class T, class Make>
GgufValue make_array(const std::vector<T>& items, GgufType elem_type, Make make) {
  std::vector<GgufValue> values;
  values.reserve(items.size());
  for (const T& x : items) values.push_back(make(x));
  return gguf_array(elem_type, std::move(values));
}

GgufValue make_int(GgufType t, uint64_t bits) {
  GgufValue v;
  v.type = t;
  v.bits = bits;
  return v;
}

GgufValue make_real(GgufType t, double real) {
  GgufValue v;
  v.type = t;
  v.real = real;
  return v;
}

}  // namespace

GgufValue gguf_uint8(uint8_t v) { return make_int(GgufType::UINT8, v); }
GgufValue gguf_int8(int8_t v) { return make_int(GgufType::INT8, static_cast<uint64_t>(int64_t{v})); }
GgufValue gguf_uint16(uint16_t v) { return make_int(GgufType::UINT16, v); }
GgufValue gguf_int16(int16_t v) { return make_int(GgufType::INT16, static_cast<uint64_t>(int64_t{v})); }
GgufValue gguf_uint32(uint32_t v) { return make_int(GgufType::UINT32, v); }
GgufValue gguf_int32(int32_t v) { return make_int(GgufType::INT32, static_cast<uint64_t>(int64_t{v})); }
GgufValue gguf_uint64(uint64_t v) { return make_int(GgufType::UINT64, v); }
GgufValue gguf_int64(int64_t v) { return make_int(GgufType::INT64, static_cast<uint64_t>(v)); }
GgufValue gguf_float32(float v) { return make_real(GgufType::FLOAT32, v); }
GgufValue gguf_float64(double v) { return make_real(GgufType::FLOAT64, v); }
GgufValue gguf_bool(bool v) { return make_int(GgufType::BOOL, v ? 1 : 0); }

GgufValue gguf_string(std::string_view s) {
  GgufValue v;
  v.type = GgufType::STRING;
  v.str = s;
  return v;
}

GgufValue gguf_array(GgufType elem_type, std::vector<GgufValue> items) {
  GgufValue v;
  v.type = GgufType::ARRAY;
  v.elem_type = elem_type;
  v.items = std::move(items);
  return v;
}

// ---- metadata ----

void GgufWriter::add(std::string_view key, const GgufValue& value) {
  if (key.empty()) fail("GGUF writer: empty metadata key");
  if (key.find('\0') != std::string_view::npos) fail("GGUF writer: metadata key contains a NUL byte");
  if (key == "general.alignment") {
    if (!value.is_integer())
      fail("GGUF writer: general.alignment must be an integer, not a {}", gguf_type_name(value.type));
    const bool negative = value.is_signed() && static_cast<int64_t>(value.bits) < 0;
    const uint64_t a = value.bits;
    if (negative || a == 0 || (a & (a - 1)) != 0 || a > kMaxAlignment)
      fail("GGUF writer: general.alignment {} is not a power of two up to 1 MiB",
           value.is_signed() ? fmt::format("{}", static_cast<int64_t>(a)) : fmt::format("{}", a));
  }
  Kv kv;
  kv.key = std::string(key);
  Encoder e(kv.encoded);
  if (static_cast<uint32_t>(value.type) >= kGgufTypeCount)
    fail("GGUF writer: key '{}': invalid value type id {}", key, static_cast<uint32_t>(value.type));
  e.put(static_cast<uint32_t>(value.type));
  encode_payload(e, value, key, 0);
  // Only now, with the value known to be good, does the entry change.
  if (key == "general.alignment") alignment_ = static_cast<size_t>(value.bits);
  for (Kv& existing : kv_) {
    if (existing.key == key) {
      existing.encoded = std::move(kv.encoded);
      return;
    }
  }
  kv_.push_back(std::move(kv));
}

bool GgufWriter::remove(std::string_view key) {
  auto it = std::find_if(kv_.begin(), kv_.end(), [&](const Kv& kv) { return kv.key == key; });
  if (it == kv_.end()) return false;
  kv_.erase(it);
  if (key == "general.alignment") alignment_ = kDefaultAlignment;
  return true;
}

bool GgufWriter::has(std::string_view key) const {
  return std::any_of(kv_.begin(), kv_.end(), [&](const Kv& kv) { return kv.key == key; });
}

void GgufWriter::set_strings(std::string_view key, const std::vector<std::string>& v) {
  add(key, make_array(v, GgufType::STRING, [](const std::string& s) { return gguf_string(s); }));
}

void GgufWriter::set_int32s(std::string_view key, const std::vector<int32_t>& v) {
  add(key, make_array(v, GgufType::INT32, gguf_int32));
}

void GgufWriter::set_float32s(std::string_view key, const std::vector<float>& v) {
  add(key, make_array(v, GgufType::FLOAT32, gguf_float32));
}

void GgufWriter::set_alignment(size_t alignment) {
  if (alignment > std::numeric_limits<uint32_t>::max())
    fail("GGUF writer: general.alignment {} is not a power of two up to 1 MiB", alignment);
  set_uint32("general.alignment", static_cast<uint32_t>(alignment));
}

void GgufWriter::copy_metadata_from(const GgufFile& f) {
  for (const auto& [key, value] : f.metadata()) add(key, value);
}

// ---- tensors ----

GgufWriter::Tensor& GgufWriter::new_tensor(std::string_view name, GgmlType type,
                                           const std::vector<int64_t>& ne) {
  if (name.empty()) fail("GGUF writer: empty tensor name");
  if (name.size() > kMaxTensorName)
    fail("GGUF writer: tensor '{}': name longer than {} bytes (llama.cpp's limit)", name, kMaxTensorName);
  if (name.find('\0') != std::string_view::npos) fail("GGUF writer: tensor name contains a NUL byte");
  for (const Tensor& t : tensors_)
    if (t.name == name) fail("GGUF writer: duplicate tensor name '{}'", name);
  if (ne.empty() || ne.size() > kGgufMaxDims)
    fail("GGUF writer: tensor '{}': {} dimensions (1 to {} allowed)", name, ne.size(), kGgufMaxDims);
  const TypeTraits* tr = find_type_traits(static_cast<uint32_t>(type));
  if (tr == nullptr) fail("GGUF writer: tensor '{}': unknown type id {}", name, static_cast<uint32_t>(type));
  int64_t n_elements = 1;
  for (size_t d = 0; d < ne.size(); d++) {
    if (ne[d] <= 0 || ne[d] > kMaxDim) fail("GGUF writer: tensor '{}': dimension {} is {}", name, d, ne[d]);
    if (n_elements > std::numeric_limits<int64_t>::max() / ne[d])
      fail("GGUF writer: tensor '{}': element count overflows", name);
    n_elements *= ne[d];
  }
  if (ne[0] % tr->block_size != 0)
    fail("GGUF writer: tensor '{}': row length {} is not a multiple of the {} block size {}", name,
         ne[0], tr->name, tr->block_size);
  const uint64_t n_blocks = static_cast<uint64_t>(n_elements / tr->block_size);
  if (n_blocks > std::numeric_limits<uint64_t>::max() / 2 / tr->type_size)
    fail("GGUF writer: tensor '{}': byte size overflows", name);
  Tensor t;
  t.name = std::string(name);
  t.type = type;
  t.ne = ne;
  t.n_bytes = n_blocks * tr->type_size;
  tensors_.push_back(std::move(t));
  return tensors_.back();
}

void GgufWriter::add_tensor(std::string_view name, GgmlType type, const std::vector<int64_t>& ne,
                            std::vector<uint8_t> data) {
  Tensor& t = new_tensor(name, type, ne);
  if (data.size() != t.n_bytes) {
    const size_t expected = t.n_bytes;
    tensors_.pop_back();
    fail("GGUF writer: tensor '{}': {} bytes given, its shape and type need {}", name, data.size(),
         expected);
  }
  t.owned = std::move(data);
}

void GgufWriter::add_tensor_view(std::string_view name, GgmlType type, const std::vector<int64_t>& ne,
                                 const void* data, size_t n_bytes) {
  Tensor& t = new_tensor(name, type, ne);
  if (n_bytes != t.n_bytes || data == nullptr) {
    const size_t expected = t.n_bytes;
    tensors_.pop_back();
    fail("GGUF writer: tensor '{}': {} bytes given{}, its shape and type need {}", name, n_bytes,
         data == nullptr ? " (null pointer)" : "", expected);
  }
  t.view = static_cast<const uint8_t*>(data);
}

void GgufWriter::add_tensor_streamed(std::string_view name, GgmlType type,
                                     const std::vector<int64_t>& ne, GgufTensorProducer producer) {
  if (!producer) fail("GGUF writer: tensor '{}': no producer", name);
  Tensor& t = new_tensor(name, type, ne);
  t.producer = std::move(producer);
}

void GgufWriter::add_tensor_view(const GgufTensorInfo& info) {
  add_tensor_view(info.name, info.type, std::vector<int64_t>(info.ne, info.ne + info.n_dims),
                  info.data, info.n_bytes);
}

// ---- layout and output ----

std::vector<uint64_t> GgufWriter::layout(uint64_t* data_size) const {
  std::vector<uint64_t> offsets;
  offsets.reserve(tensors_.size());
  uint64_t end = 0;
  for (const Tensor& t : tensors_) {
    const uint64_t at = align_up(end, alignment_);
    offsets.push_back(at);
    end = at + t.n_bytes;
  }
  *data_size = end;
  return offsets;
}

std::vector<uint8_t> GgufWriter::encode_header() const {
  std::vector<uint8_t> out;
  Encoder e(out);
  out.reserve(4096);
  e.put<uint32_t>(0x46554747);  // "GGUF" read as a little-endian u32
  e.put<uint32_t>(3);
  e.put<uint64_t>(tensors_.size());
  e.put<uint64_t>(kv_.size());
  for (const Kv& kv : kv_) {
    e.put_string(kv.key);
    out.insert(out.end(), kv.encoded.begin(), kv.encoded.end());
  }
  uint64_t data_size = 0;
  const std::vector<uint64_t> offsets = layout(&data_size);
  for (size_t i = 0; i < tensors_.size(); i++) {
    const Tensor& t = tensors_[i];
    e.put_string(t.name);
    e.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) e.put<uint64_t>(static_cast<uint64_t>(n));
    e.put<uint32_t>(static_cast<uint32_t>(t.type));
    e.put<uint64_t>(offsets[i]);
  }
  return out;
}

size_t GgufWriter::header_size() const {
  const size_t n = encode_header().size();
  return tensors_.empty() ? n : align_up(n, alignment_);
}

size_t GgufWriter::file_size() const {
  uint64_t data_size = 0;
  layout(&data_size);
  return header_size() + (tensors_.empty() ? 0 : align_up(data_size, alignment_));
}

class GgufWriter::Output {
 public:
  virtual ~Output() = default;
  virtual void write(const void* data, size_t n) = 0;
  virtual const std::string& name() const = 0;
  void zeros(size_t n) {
    static const uint8_t kZeros[4096] = {};
    while (n > 0) {
      const size_t k = std::min(n, sizeof(kZeros));
      write(kZeros, k);
      n -= k;
    }
  }
};

namespace {

class MemoryOutput final : public GgufWriter::Output {
 public:
  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    bytes.insert(bytes.end(), p, p + n);
  }
  const std::string& name() const override { return name_; }
  std::vector<uint8_t> bytes;

 private:
  std::string name_ = "<memory>";
};

// Buffered writes to a file descriptor; every failure is an Error naming the file.
class FileOutput final : public GgufWriter::Output {
 public:
  FileOutput(int fd, std::string path) : fd_(fd), path_(std::move(path)) { buf_.reserve(kBufSize); }
  void write(const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    if (buf_.size() + n <= kBufSize) {
      buf_.insert(buf_.end(), p, p + n);
      return;
    }
    flush();
    if (n >= kBufSize) {
      write_fd(p, n);
    } else {
      buf_.insert(buf_.end(), p, p + n);
    }
  }
  const std::string& name() const override { return path_; }
  void flush() {
    write_fd(buf_.data(), buf_.size());
    buf_.clear();
  }
  void finish() {
    flush();
    if (::fsync(fd_) != 0) fail("{}: fsync failed: {}", path_, std::strerror(errno));
  }

 private:
  static constexpr size_t kBufSize = size_t{1} << 20;
  void write_fd(const uint8_t* p, size_t n) {
    while (n > 0) {
      const ssize_t k = ::write(fd_, p, std::min<size_t>(n, size_t{1} << 30));
      if (k < 0) {
        if (errno == EINTR) continue;
        fail("{}: write failed: {}", path_, std::strerror(errno));
      }
      if (k == 0) fail("{}: write failed: no progress", path_);
      p += k;
      n -= static_cast<size_t>(k);
    }
  }
  int fd_;
  std::string path_;
  std::vector<uint8_t> buf_;
};

// Counts what a producer writes and stops it the moment it would overrun its tensor.
class CountingSink final : public GgufTensorSink {
 public:
  CountingSink(GgufWriter::Output& out, const std::string& tensor, size_t expected)
      : out_(out), tensor_(tensor), expected_(expected) {}
  void write(const void* data, size_t n) override {
    if (n > expected_ - written_)
      fail("{}: tensor '{}': producer wrote {} bytes, more than the {} its shape and type need",
           out_.name(), tensor_, written_ + n, expected_);
    out_.write(data, n);
    written_ += n;
  }
  size_t written() const override { return written_; }
  size_t expected() const override { return expected_; }

 private:
  GgufWriter::Output& out_;
  const std::string& tensor_;
  size_t expected_;
  size_t written_ = 0;
};

}  // namespace

void GgufWriter::write_all(Output& out) const {
  const std::vector<uint8_t> header = encode_header();
  out.write(header.data(), header.size());
  if (tensors_.empty()) return;
  uint64_t data_size = 0;
  const std::vector<uint64_t> offsets = layout(&data_size);
  out.zeros(align_up(header.size(), alignment_) - header.size());
  uint64_t pos = 0;  // relative to the data section
  for (size_t i = 0; i < tensors_.size(); i++) {
    const Tensor& t = tensors_[i];
    out.zeros(offsets[i] - pos);
    if (t.producer) {
      CountingSink sink(out, t.name, t.n_bytes);
      t.producer(sink);
      if (sink.written() != t.n_bytes)
        fail("{}: tensor '{}': producer wrote {} bytes, its shape and type need {}", out.name(),
             t.name, sink.written(), t.n_bytes);
    } else {
      out.write(t.view != nullptr ? t.view : t.owned.data(), t.n_bytes);
    }
    pos = offsets[i] + t.n_bytes;
  }
  out.zeros(align_up(pos, alignment_) - pos);  // ggml pads the end too
}

std::vector<uint8_t> GgufWriter::to_bytes() const {
  MemoryOutput out;
  try {
    write_all(out);
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {  // e.g. a producer's own exception: one error type out
    fail("{}: writing failed: {}", out.name(), e.what());
  }
  return std::move(out.bytes);
}

void GgufWriter::write(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) fail("{}: cannot create: {}", tmp, std::strerror(errno));
  bool closed = false;
  auto discard = [&] {
    if (!closed) ::close(fd);
    ::unlink(tmp.c_str());
  };
  try {
    FileOutput out(fd, tmp);
    write_all(out);
    out.finish();
    closed = true;
    if (::close(fd) != 0) fail("{}: close failed: {}", tmp, std::strerror(errno));
    if (::rename(tmp.c_str(), path.c_str()) != 0)
      fail("{}: cannot rename {} to it: {}", path, tmp, std::strerror(errno));
  } catch (const Error&) {
    discard();
    throw;
  } catch (const std::exception& e) {
    discard();
    fail("{}: writing failed: {}", path, e.what());
  } catch (...) {
    discard();
    throw;
  }
}

}  // namespace lumen
