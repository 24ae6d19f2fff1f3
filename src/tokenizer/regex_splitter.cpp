#include "tokenizer/regex_splitter.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>

#include "core/error.h"
#include "tokenizer/unicode.h"

namespace lumen {

namespace {

std::string pcre2_message(int code) {
  PCRE2_UCHAR buffer[256];
  if (pcre2_get_error_message(code, buffer, sizeof(buffer)) < 0) return fmt::format("error {}", code);
  return std::string(reinterpret_cast<const char*>(buffer));
}

struct CodeFree {
  void operator()(pcre2_code* code) const { pcre2_code_free(code); }
};
struct MatchDataFree {
  void operator()(pcre2_match_data* data) const { pcre2_match_data_free(data); }
};
using CodePtr = std::unique_ptr<pcre2_code, CodeFree>;
using MatchDataPtr = std::unique_ptr<pcre2_match_data, MatchDataFree>;

// Per-thread match context with a JIT stack that can grow to 8 MiB: the default 32 KiB on the
// machine stack is too small for patterns with nested groups (exaone-moe) over long words.
// PCRE2 reserves the address range up front but touches pages only as the stack grows.
class ThreadMatchContext {
 public:
  ThreadMatchContext() {
    context_ = pcre2_match_context_create(nullptr);
    jit_stack_ = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, nullptr);
    if (context_ != nullptr && jit_stack_ != nullptr) {
      pcre2_jit_stack_assign(context_, nullptr, jit_stack_);
    }
  }
  ~ThreadMatchContext() {
    pcre2_match_context_free(context_);
    pcre2_jit_stack_free(jit_stack_);
  }
  ThreadMatchContext(const ThreadMatchContext&) = delete;
  ThreadMatchContext& operator=(const ThreadMatchContext&) = delete;

  pcre2_match_context* get() const { return context_; }  // nullptr: PCRE2's defaults

 private:
  pcre2_match_context* context_ = nullptr;
  pcre2_jit_stack* jit_stack_ = nullptr;
};

pcre2_match_context* thread_match_context() {
  thread_local ThreadMatchContext context;
  return context.get();
}

// A byte range [begin, end) of the (valid UTF-8) text being split.
struct Span {
  size_t begin;
  size_t end;
};

}  // namespace

struct RegexSplitter::Impl {
  std::string name;
  std::vector<CodePtr> codes;
  std::vector<std::string> patterns;  // for error messages
  uint32_t n_ovector_pairs = 1;

  // pcre2_match with errors turned into lumen::Error; NOMATCH is returned, not thrown.
  int match(size_t index, PCRE2_SPTR subject, size_t length, size_t offset, uint32_t flags,
            pcre2_match_data* match_data, pcre2_match_context* context) const {
    // The text was validated (or sanitized) once; PCRE2 would otherwise re-check the subject
    // on every call, which makes splitting quadratic.
    flags |= PCRE2_NO_UTF_CHECK;
    int rc = pcre2_match(codes[index].get(), subject, length, offset, flags, match_data, context);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT) {
      // The interpreter keeps its backtracking state on the heap: slower, but no stack limit.
      rc = pcre2_match(codes[index].get(), subject, length, offset, flags | PCRE2_NO_JIT,
                       match_data, context);
    }
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      fail("pre-tokenizer '{}': regex /{}/ failed on a {}-byte piece: {}", name, patterns[index],
           length, pcre2_message(rc));
    }
    return rc;
  }

  // Appends to `out` the matches of regex `index` within `piece` and the gaps between them,
  // in order, without empty ones.
  void split_piece(size_t index, std::string_view text, Span piece, pcre2_match_data* match_data,
                   pcre2_match_context* context, std::vector<Span>& out) const {
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data() + piece.begin);
    const size_t length = piece.end - piece.begin;
    const auto emit = [&](size_t begin, size_t end) {
      if (end > begin) out.push_back({piece.begin + begin, piece.begin + end});
    };

    size_t offset = 0;         // where the next search starts
    size_t emitted_end = 0;    // end of what has been emitted so far
    uint32_t retry_flags = 0;  // after an empty match: a non-empty one at the same place only
    while (offset <= length) {
      const int rc = match(index, subject, length, offset, retry_flags, match_data, context);
      if (rc == PCRE2_ERROR_NOMATCH) {
        if (retry_flags == 0 || offset >= length) break;
        retry_flags = 0;
        offset += utf8_sequence_length(static_cast<uint8_t>(subject[offset]));
        continue;
      }
      const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(match_data);
      const size_t match_begin = ovector[0];
      const size_t match_end = ovector[1];
      emit(emitted_end, match_begin);
      emit(match_begin, match_end);
      emitted_end = match_end;
      offset = match_end;
      retry_flags = match_begin == match_end ? (PCRE2_NOTEMPTY_ATSTART | PCRE2_ANCHORED) : 0;
    }
    emit(emitted_end, length);
  }
};

RegexSplitter::RegexSplitter(std::string_view name, const std::vector<std::string_view>& regexes)
    : impl_(std::make_unique<Impl>()) {
  impl_->name = name;
  for (std::string_view pattern : regexes) {
    int error_code = 0;
    PCRE2_SIZE error_offset = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_DOLLAR_ENDONLY, &error_code,
                                     &error_offset, nullptr);
    if (code == nullptr) {
      fail("pre-tokenizer '{}': regex /{}/ does not compile at offset {}: {}", name, pattern,
           error_offset, pcre2_message(error_code));
    }
    CodePtr owned(code);
    // JIT is an optimisation only: without it (no JIT support, no executable memory)
    // pcre2_match interprets the same compiled pattern.
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE);
    uint32_t n_captures = 0;
    pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &n_captures);
    impl_->n_ovector_pairs = std::max(impl_->n_ovector_pairs, n_captures + 1);
    impl_->codes.push_back(std::move(owned));
    impl_->patterns.emplace_back(pattern);
  }
}

RegexSplitter::~RegexSplitter() = default;
RegexSplitter::RegexSplitter(RegexSplitter&&) noexcept = default;
RegexSplitter& RegexSplitter::operator=(RegexSplitter&&) noexcept = default;

std::vector<std::string> RegexSplitter::split(std::string_view text) const {
  std::string sanitized;
  if (!utf8_is_valid(text)) {
    sanitized = utf8_sanitize(text);
    text = sanitized;
  }
  if (text.empty()) return {};

  MatchDataPtr match_data(pcre2_match_data_create(impl_->n_ovector_pairs, nullptr));
  if (match_data == nullptr) fail("pre-tokenizer '{}': out of memory", impl_->name);
  pcre2_match_context* context = thread_match_context();

  std::vector<Span> pieces{{0, text.size()}};
  std::vector<Span> next;
  for (size_t i = 0; i < impl_->codes.size(); ++i) {
    next.clear();
    next.reserve(pieces.size() * 2);
    for (const Span& piece : pieces) {
      impl_->split_piece(i, text, piece, match_data.get(), context, next);
    }
    pieces.swap(next);
  }

  std::vector<std::string> words;
  words.reserve(pieces.size());
  for (const Span& piece : pieces) {
    words.emplace_back(text.substr(piece.begin, piece.end - piece.begin));
  }
  return words;
}

}  // namespace lumen
