// ApiServer: the OpenAI-compatible routes over one EngineCore. It runs on the HTTP server's I/O
// threads and only parses, validates, tokenizes, renders chat templates and submits; the
// engine thread does the work and the responses are GenerationStreams the connections drain.
//
// Routes: GET / and /assets/* (the web page, webui/, unless --no-webui; no key needed: it is
// static and asks the user for the key), POST /v1/completions, POST /v1/chat/completions, GET /v1/models, GET /health (200
// once the model is loaded, 503 before), GET /metrics (Prometheus), POST /tokenize,
// POST /detokenize. With an API key every route but /health needs `Authorization: Bearer KEY`
// (compared in constant time).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>

#include "server/grammar_cache.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/openai_request.h"

namespace lumen {
class EngineCore;
class Tokenizer;
}  // namespace lumen

namespace lumen::server {

struct ApiConfig {
  std::string model_name;                // --model-alias, else the file's name without .gguf
  std::vector<std::string> model_names;  // every name a request's "model" may give
  std::string api_key;                   // "" = no authentication
  bool webui = true;                     // serve the web page at / (--no-webui: off)
  ApiLimits limits;
};

// What exists once the model is loaded.
struct ApiBackend {
  EngineCore* engine = nullptr;
  const Tokenizer* tokenizer = nullptr;
  // Renders a chat template's variables to the prompt text (null: the model has no template).
  std::function<std::string(const Json& variables)> render_chat;
  std::string bos_token, eos_token;  // as the template sees them ("" = not passed)
  ToolCallFormat tool_format = ToolCallFormat::Hermes;  // how the template's models write tool calls
  int64_t n_ctx = 0;
};

class ApiServer {
 public:
  explicit ApiServer(ApiConfig config);
  void set_ready(ApiBackend backend);  // /health turns 200
  void set_draining();                  // shutting down: new generations get 503
  HttpResponse handle(const HttpRequest& req);
  HttpResponse error_response(int status, const std::string& message, const std::string& param = {},
                              const std::string& code = {}) const;
  ServerMetrics& metrics() { return metrics_; }

 private:
  HttpResponse generate(const HttpRequest& req, bool chat);
  HttpResponse tokenize(const HttpRequest& req);
  HttpResponse detokenize(const HttpRequest& req);
  HttpResponse models() const;
  HttpResponse metrics_page() const;
  HttpResponse web_page(const HttpRequest& req) const;
  bool authorized(const HttpRequest& req) const;

  ApiConfig config_;
  ApiBackend backend_;
  std::atomic<bool> ready_{false};
  std::atomic<bool> draining_{false};
  int64_t started_at_;
  ServerMetrics metrics_;
  GrammarCache grammars_;  // response_format, grammar and tool-call grammars, by text
};

// Equal strings, in time that depends only on their lengths (an API key is not leaked byte by
// byte through timing).
bool constant_time_equal(const std::string& a, const std::string& b);

}  // namespace lumen::server
