// The table behind PreTokenizer: which regexes each `tokenizer.ggml.pre` type applies, in order.
// Several types share one set (e.g. "llama-bpe", "dbrx" and "smaug-bpe" all split like Llama 3).
#pragma once

#include <string_view>
#include <vector>

namespace lumen {

struct PreTokenizerRegexSet {
  std::string_view name;                    // the set's own name, for messages and tests
  std::vector<std::string_view> pre_types;  // `tokenizer.ggml.pre` values that use this set
  std::vector<std::string_view> regexes;    // PCRE2 syntax (UTF + UCP), applied in order
};

const std::vector<PreTokenizerRegexSet>& pre_tokenizer_regex_sets();

// Digit grouping of "tiny_aya" and "superbpe": \d runs cut into groups of three counted from the
// right ("1234567" -> 1|234|567). The patterns of their tokenizer.json take time quadratic in
// the length of a digit run (every start position looks ahead to the run's end: 100 KB of
// digits would take seconds to minutes), so lumen runs equivalent linear-time patterns instead;
// tests/unit/pretokenizer_test.cpp checks the equivalence on random strings.
//
// tiny_aya: match a group. A match can start only where a run starts ((?<!\d): a run whose
// first position fails fails everywhere, since all its positions share the run's end and the
// \b after it), and once a group has matched inside a run, the rest of the run is whole groups
// of three, taken right where the previous match ended (\G).
inline constexpr std::string_view kTinyAyaDigitGroupsOriginal = R"re(\d{1,3}(?=(?:\d{3})*\b))re";
inline constexpr std::string_view kTinyAyaDigitGroups =
    R"re((?<=\d)\G\d{3}|(?<!\d)\d{1,3}(?=(?:\d{3})*\b))re";
// superbpe: an empty match (a cut) before every digit that has a positive multiple of three
// digits from it to the end of its run. The full look-ahead runs only on a run's first three
// positions; every later cut is the one three digits after the previous cut: after an empty
// match the search resumes one character later, so \G then sits two digits past that cut.
inline constexpr std::string_view kSuperBpeDigitGroupsOriginal = R"re((?=(\d{3})+(?!\d)))re";
inline constexpr std::string_view kSuperBpeDigitGroups =
    R"re((?<=\d\G\d\d)(?=\d{3})|(?:(?<!\d)|(?<=(?<!\d)\d)|(?<=(?<!\d)\d\d))(?=(?:\d{3})+(?!\d)))re";

// afmoe: llama.cpp cuts each \p{N} run into groups of three counted from the right with custom
// code that also leaves the text since the previous cut glued to a run's first group ("ab1234"
// -> "ab1" "234" "..."); the later regexes re-split that text, but not always identically (Thai
// digits fall in its script class), so this pattern reproduces the glue: every match starts
// where the previous one ended (\G), either three more digits inside a run or the non-numbers
// up to the next run and that run's first group.
inline constexpr std::string_view kAfmoeDigitGroups =
    R"re(\G(?:(?<=\p{N})\p{N}{3}|\P{N}*+\p{N}{1,3}(?=(?:\p{N}{3})*+(?!\p{N}))))re";

// The set a pre_type uses; nullptr when no set lists it.
const PreTokenizerRegexSet* find_pre_tokenizer_regex_set(std::string_view pre_type);

}  // namespace lumen
