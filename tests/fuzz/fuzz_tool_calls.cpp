// libFuzzer target: the tool-call parsers and the streaming splitter (server/tool_calls.h) over
// any model output. Input: one byte choosing the family and how the text is cut into stream
// pieces, then the text. Never a crash or an exception, and streaming must agree with parsing
// the whole: the released text plus the rest at the end is the parse's content (or the whole
// text when there are no calls), and the same calls come out.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/tool_calls.h"

using namespace lumen::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const ToolCallFormat format = static_cast<ToolCallFormat>(data[0] % 3);
  const size_t piece = 1 + (data[0] >> 2) % 13;  // bytes per streamed piece
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::vector<std::string> names = {"f", "get_weather", "add"};

  const ParsedToolOutput whole = parse_tool_calls(format, text, names);
  ToolCallSplitter splitter(format, names);
  std::string released;
  for (size_t i = 0; i < text.size(); i += piece) released += splitter.push(text.substr(i, piece));
  std::string rest;
  const ParsedToolOutput streamed = splitter.finish(rest);
  const std::string& want = whole.calls.empty() ? std::string(text) : whole.content;
  if (released + rest != want || streamed.calls.size() != whole.calls.size()) abort();
  for (size_t i = 0; i < whole.calls.size(); i++)
    if (streamed.calls[i].name != whole.calls[i].name || streamed.calls[i].arguments != whole.calls[i].arguments) abort();
  return 0;
}
