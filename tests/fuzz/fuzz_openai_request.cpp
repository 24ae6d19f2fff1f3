// libFuzzer target: the HTTP request bodies of the OpenAI-compatible routes. Any bytes must end
// as a parsed request or an ApiError (a 400 with a message), never a crash, a hang, another
// exception type (the server would answer 500) or unbounded recursion on deep nesting.
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "server/openai_request.h"

using namespace lumen::server;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  ApiLimits limits;
  Json j;
  try {
    j = parse_json_body(body, limits);
  } catch (const ApiError&) {
    return 0;
  }
  // Every route's parser over the same body: a small vocabulary makes id checks bite.
  for (int route = 0; route < 4; route++) {
    try {
      switch (route) {
        case 0: (void)parse_completion_request(j, limits, 512); break;
        case 1: (void)parse_chat_request(j, limits, 512); break;
        case 2: (void)parse_tokenize_request(j); break;
        case 3: (void)parse_detokenize_request(j, 512); break;
      }
    } catch (const ApiError&) {
    }
  }
  return 0;
}
