#include "gguf/gguf_file.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <limits>

#include "core/error.h"

namespace lumen {

namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr int kMaxArrayDepth = 8;

// Reads little-endian fields from the mapping, checking every read against the end.
// v1 files use 32-bit counts and lengths where v2/v3 use 64-bit ones.
class Cursor {
 public:
  Cursor(const uint8_t* base, size_t size, const std::string& path)
      : base_(base), size_(size), path_(path) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }
  void set_wide(bool wide) { wide_ = wide; }
  bool wide() const { return wide_; }

  template <class T>
  T read(std::string_view what) {
    if (remaining() < sizeof(T))
      fail("{}: truncated at byte {} while reading {} (file has {} bytes)", path_, pos_, what, size_);
    T v;
    std::memcpy(&v, base_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }

  // A count or length: u64 in v2/v3, u32 in v1.
  uint64_t read_size(std::string_view what) {
    return wide_ ? read<uint64_t>(what) : read<uint32_t>(what);
  }

  std::string_view read_string(std::string_view what) {
    const uint64_t n = read_size(what);
    if (n > remaining())
      fail("{}: {}: string length {} at byte {} runs past the end of the file ({} bytes left)",
           path_, what, n, pos_, remaining());
    std::string_view s(reinterpret_cast<const char*>(base_ + pos_), n);
    pos_ += n;
    return s;
  }

 private:
  const uint8_t* base_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& path_;
  bool wide_ = true;
};

size_t scalar_size(GgufType t) {
  switch (t) {
    case GgufType::UINT8: case GgufType::INT8: case GgufType::BOOL: return 1;
    case GgufType::UINT16: case GgufType::INT16: return 2;
    case GgufType::UINT32: case GgufType::INT32: case GgufType::FLOAT32: return 4;
    case GgufType::UINT64: case GgufType::INT64: case GgufType::FLOAT64: return 8;
    default: return 0;
  }
}

// Smallest number of bytes one element of an array of type t can occupy.
size_t min_encoded_size(GgufType t, bool wide) {
  if (t == GgufType::STRING) return wide ? 8 : 4;
  if (t == GgufType::ARRAY) return 4 + (wide ? 8 : 4);
  return scalar_size(t);
}

GgufType read_type(Cursor& c, const std::string& path, const std::string& key) {
  const uint32_t t = c.read<uint32_t>(key);
  if (t >= kGgufTypeCount) fail("{}: key '{}': invalid value type id {}", path, key, t);
  return static_cast<GgufType>(t);
}

void read_value(Cursor& c, GgufValue& v, GgufType type, const std::string& path,
                const std::string& key, int depth) {
  v.type = type;
  switch (type) {
    case GgufType::UINT8: v.bits = c.read<uint8_t>(key); break;
    case GgufType::INT8: v.bits = static_cast<uint64_t>(static_cast<int64_t>(c.read<int8_t>(key))); break;
    case GgufType::UINT16: v.bits = c.read<uint16_t>(key); break;
    case GgufType::INT16: v.bits = static_cast<uint64_t>(static_cast<int64_t>(c.read<int16_t>(key))); break;
    case GgufType::UINT32: v.bits = c.read<uint32_t>(key); break;
    case GgufType::INT32: v.bits = static_cast<uint64_t>(static_cast<int64_t>(c.read<int32_t>(key))); break;
    case GgufType::UINT64: v.bits = c.read<uint64_t>(key); break;
    case GgufType::INT64: v.bits = static_cast<uint64_t>(c.read<int64_t>(key)); break;
    case GgufType::FLOAT32: v.real = c.read<float>(key); break;
    case GgufType::FLOAT64: v.real = c.read<double>(key); break;
    case GgufType::BOOL: {
      const uint8_t b = c.read<uint8_t>(key);
      if (b > 1) fail("{}: key '{}': bool value {} is neither 0 nor 1", path, key, b);
      v.bits = b;
      break;
    }
    case GgufType::STRING: v.str = c.read_string(key); break;
    case GgufType::ARRAY: {
      if (depth >= kMaxArrayDepth)
        fail("{}: key '{}': arrays nested deeper than {}", path, key, kMaxArrayDepth);
      v.elem_type = read_type(c, path, key);
      const uint64_t n = c.read_size(key);
      // Bound the count by what the rest of the file could hold before allocating anything.
      const size_t min_size = min_encoded_size(v.elem_type, c.wide());
      if (n > c.remaining() / std::max<size_t>(min_size, 1))
        fail("{}: key '{}': array of {} {} elements cannot fit in the {} bytes left", path, key, n,
             gguf_type_name(v.elem_type), c.remaining());
      v.items.resize(n);
      for (uint64_t i = 0; i < n; i++) read_value(c, v.items[i], v.elem_type, path, key, depth + 1);
      break;
    }
  }
}

bool valid_utf8_name(std::string_view s) { return !s.empty() && s.find('\0') == std::string_view::npos; }

// A key or tensor name as shown in an error message: control bytes escaped and long names cut,
// so a hostile name can neither split the one-line message nor make it megabytes long.
std::string printable(std::string_view s) {
  constexpr size_t kMaxShown = 96;
  std::string out;
  for (size_t i = 0; i < s.size() && i < kMaxShown; i++) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c < 0x20 || c == 0x7f) out += fmt::format("\\x{:02x}", c);
    else out += static_cast<char>(c);
  }
  if (s.size() > kMaxShown) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

}  // namespace

std::string GgufTensorInfo::shape_string() const {
  std::string s = "[";
  for (int i = 0; i < n_dims; i++) s += fmt::format("{}{}", i ? ", " : "", ne[i]);
  return s + "]";
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->mapping_ = std::make_unique<MappedFile>(path);
  f->path_ = path;
  f->base_ = f->mapping_->data();
  f->size_ = f->mapping_->size();
  f->parse_all();
  return f;
}

std::unique_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, const std::string& name) {
  std::unique_ptr<GgufFile> f(new GgufFile());
  f->path_ = name;
  f->base_ = data;
  f->size_ = size;
  f->parse_all();
  return f;
}

void GgufFile::parse_all() {
  Cursor c(base_, size_, path_);
  if (size_ < 4 || std::memcmp(base_, "GGUF", 4) != 0) {
    if (size_ >= 4 && (std::memcmp(base_, "ggml", 4) == 0 || std::memcmp(base_, "ggjt", 4) == 0 ||
                       std::memcmp(base_, "lmgg", 4) == 0 || std::memcmp(base_, "tjgg", 4) == 0))
      fail("{}: a pre-GGUF (GGML/GGJT) model file; convert it to GGUF", path_);
    fail("{}: not a GGUF file (bad magic)", path_);
  }
  c.read<uint32_t>("magic");
  version_ = c.read<uint32_t>("version");
  if (version_ == 0 || version_ > 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    if (swapped >= 1 && swapped <= 3) fail("{}: big-endian GGUF files are not supported", path_);
    fail("{}: unsupported GGUF version {} (lumen reads versions 1, 2 and 3)", path_, version_);
  }
  c.set_wide(version_ >= 2);

  const uint64_t n_tensors = c.read_size("tensor count");
  const uint64_t n_kv = c.read_size("metadata count");
  // Each key/value needs at least a length, a type id and one byte; each tensor info at least a
  // name length, n_dims, a type and an offset. Refuse counts the file cannot possibly hold.
  const size_t min_kv_size = (c.wide() ? 8 : 4) + 1 + 4 + 1;
  if (n_kv > c.remaining() / min_kv_size)
    fail("{}: metadata count {} is impossible for a file of {} bytes", path_, n_kv, size_);
  if (n_tensors > c.remaining() / 24)
    fail("{}: tensor count {} is impossible for a file of {} bytes", path_, n_tensors, size_);

  kv_.reserve(n_kv);
  for (uint64_t i = 0; i < n_kv; i++) {
    std::string key(c.read_string(fmt::format("key of metadata entry {}", i)));
    if (!valid_utf8_name(key)) fail("{}: metadata entry {} has an empty or invalid key", path_, i);
    const std::string label = printable(key);
    if (kv_index_.count(key)) fail("{}: duplicate metadata key '{}'", path_, label);
    GgufValue v;
    const GgufType t = read_type(c, path_, label);
    // v1 used 32-bit lengths inside values too; Cursor::read_size handles both.
    read_value(c, v, t, path_, label, 0);
    kv_index_.emplace(key, kv_.size());
    kv_.emplace_back(std::move(key), std::move(v));
  }

  if (const GgufValue* a = find("general.alignment")) {
    if (!a->is_integer()) fail("{}: general.alignment must be an integer, found {}", path_, gguf_type_name(a->type));
    const uint64_t al = a->bits;
    if (a->is_signed() && static_cast<int64_t>(al) <= 0) fail("{}: general.alignment {} is not positive", path_, static_cast<int64_t>(al));
    if (al == 0 || (al & (al - 1)) != 0 || al > (1u << 20))
      fail("{}: general.alignment {} is not a power of two up to 1 MiB", path_, al);
    alignment_ = al;
  } else {
    alignment_ = kDefaultAlignment;
  }

  tensors_.resize(n_tensors);
  for (uint64_t i = 0; i < n_tensors; i++) {
    GgufTensorInfo& t = tensors_[i];
    t.name = std::string(c.read_string(fmt::format("name of tensor {}", i)));
    if (!valid_utf8_name(t.name)) fail("{}: tensor {} has an empty or invalid name", path_, i);
    const std::string label = printable(t.name);
    const std::string what = fmt::format("tensor '{}'", label);  // for truncation messages
    if (tensor_index_.count(t.name)) fail("{}: duplicate tensor name '{}'", path_, label);
    tensor_index_.emplace(t.name, i);
    const uint32_t n_dims = c.read<uint32_t>(what);
    if (n_dims == 0 || n_dims > kGgufMaxDims)
      fail("{}: tensor '{}': {} dimensions (1 to {} allowed)", path_, label, n_dims, kGgufMaxDims);
    t.n_dims = static_cast<int>(n_dims);
    int64_t n_elements = 1;
    for (uint32_t d = 0; d < n_dims; d++) {
      const uint64_t ne = c.read_size(what);
      if (ne == 0 || ne > (uint64_t{1} << 40))
        fail("{}: tensor '{}': dimension {} is {}", path_, label, d, ne);
      t.ne[d] = static_cast<int64_t>(ne);
      if (n_elements > std::numeric_limits<int64_t>::max() / t.ne[d])
        fail("{}: tensor '{}': element count overflows", path_, label);
      n_elements *= t.ne[d];
    }
    const uint32_t type_id = c.read<uint32_t>(what);
    const TypeTraits* tr = find_type_traits(type_id);
    if (tr == nullptr) fail("{}: tensor '{}': unknown tensor type id {}", path_, label, type_id);
    t.type = tr->type;
    if (t.ne[0] % tr->block_size != 0)
      fail("{}: tensor '{}' ({}): row length {} is not a multiple of the {} block size {}", path_,
           label, t.shape_string(), t.ne[0], tr->name, tr->block_size);
    const uint64_t n_blocks = static_cast<uint64_t>(n_elements / tr->block_size);
    if (n_blocks > std::numeric_limits<uint64_t>::max() / tr->type_size)
      fail("{}: tensor '{}': byte size overflows", path_, label);
    t.n_bytes = n_blocks * tr->type_size;
    t.offset = c.read<uint64_t>(what);
    if (t.offset % alignment_ != 0)
      fail("{}: tensor '{}': data offset {} is not a multiple of the alignment {}", path_, label,
           t.offset, alignment_);
  }

  // The data section starts at the next multiple of the alignment.
  const size_t header_end = c.pos();
  data_offset_ = (header_end + alignment_ - 1) / alignment_ * alignment_;
  if (n_tensors > 0 && data_offset_ > size_)
    fail("{}: truncated: tensor data would start at byte {} but the file has {} bytes", path_,
         data_offset_, size_);
  const size_t data_size = size_ >= data_offset_ ? size_ - data_offset_ : 0;
  for (GgufTensorInfo& t : tensors_) {
    if (t.offset > data_size || t.n_bytes > data_size - t.offset)
      fail("{}: tensor '{}' ({} {}, {} bytes at data offset {}) runs past the end of the file "
           "({} bytes of tensor data): the file is truncated or corrupt",
           path_, printable(t.name), type_name(t.type), t.shape_string(), t.n_bytes, t.offset, data_size);
    t.data = base_ + data_offset_ + t.offset;
  }
  // No two tensors may share bytes.
  std::vector<const GgufTensorInfo*> by_offset;
  by_offset.reserve(tensors_.size());
  for (const GgufTensorInfo& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensorInfo* a, const GgufTensorInfo* b) { return a->offset < b->offset; });
  for (size_t i = 1; i < by_offset.size(); i++) {
    const GgufTensorInfo* a = by_offset[i - 1];
    const GgufTensorInfo* b = by_offset[i];
    if (a->offset + a->n_bytes > b->offset)
      fail("{}: tensors '{}' and '{}' overlap in the data section", path_, printable(a->name),
           printable(b->name));
  }
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = kv_index_.find(key);
  return it == kv_index_.end() ? nullptr : &kv_[it->second].second;
}

std::optional<int64_t> GgufFile::get_int(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_int(fmt::format("{}: key '{}'", path_, key));
}

std::optional<double> GgufFile::get_float(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_float(fmt::format("{}: key '{}'", path_, key));
}

std::optional<bool> GgufFile::get_bool(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_bool(fmt::format("{}: key '{}'", path_, key));
}

std::optional<std::string_view> GgufFile::get_string(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  return v->as_string(fmt::format("{}: key '{}'", path_, key));
}

const std::vector<GgufValue>* GgufFile::get_array(std::string_view key) const {
  const GgufValue* v = find(key);
  if (!v) return nullptr;
  return &v->as_array(fmt::format("{}: key '{}'", path_, key));
}

int64_t GgufFile::require_int(std::string_view key) const {
  auto v = get_int(key);
  if (!v) fail("{}: required metadata key '{}' is missing", path_, key);
  return *v;
}

std::string_view GgufFile::require_string(std::string_view key) const {
  auto v = get_string(key);
  if (!v) fail("{}: required metadata key '{}' is missing", path_, key);
  return *v;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

}  // namespace lumen
