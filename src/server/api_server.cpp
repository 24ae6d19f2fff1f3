#include "server/api_server.h"

#include <algorithm>
#include <chrono>
#include <random>

#include "engine/engine_core.h"
#include "server/generation_stream.h"
#include "server/web_assets.h"
#include "tokenizer/tokenizer.h"

namespace lumen::server {

bool constant_time_equal(const std::string& a, const std::string& b) {
  const size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < n; i++) {
    const unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    const unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff |= static_cast<unsigned char>(x ^ y);
  }
  return diff == 0;
}

namespace {

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return fmt::format("{}{:016x}{:08x}", prefix, rng(), static_cast<uint32_t>(rng()));
}

HttpResponse json_response(int status, const Json& j) {
  HttpResponse r;
  r.status = status;
  r.body = j.dump(-1, ' ', false, Json::error_handler_t::replace);
  return r;
}

}  // namespace

ApiServer::ApiServer(ApiConfig config) : config_(std::move(config)), started_at_(unix_now()) {}

void ApiServer::set_ready(ApiBackend backend) {
  backend_ = std::move(backend);
  ready_.store(true, std::memory_order_release);
}

void ApiServer::set_draining() { draining_.store(true); }

HttpResponse ApiServer::error_response(int status, const std::string& message, const std::string& param, const std::string& code) const {
  HttpResponse r;
  r.status = status;
  r.body = error_body(status, message, param, code);
  if (status == 401) r.headers.emplace_back("WWW-Authenticate", "Bearer");
  if (status == 429 || status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

bool ApiServer::authorized(const HttpRequest& req) const {
  if (config_.api_key.empty()) return true;
  return constant_time_equal(req.header("authorization"), "Bearer " + config_.api_key);
}

HttpResponse ApiServer::handle(const HttpRequest& req) {
  const std::string& p = req.path;
  const bool get = req.method == "GET" || req.method == "HEAD";
  const bool post = req.method == "POST";
  try {
    if (p == "/health" || p == "/v1/health") {
      if (!get) return error_response(405, "use GET for " + p);
      if (!ready_.load(std::memory_order_acquire)) return error_response(503, "the model is loading", {}, "model_loading");
      return json_response(200, Json{{"status", "ok"}});
    }
    if (p == "/" || p.starts_with("/assets/")) {
      if (!get) return error_response(405, "use GET for " + p);
      return web_page(req);
    }
    struct Route {
      const char* path;
      bool post;
    };
    static const Route kRoutes[] = {{"/v1/completions", true}, {"/v1/chat/completions", true}, {"/tokenize", true},
                                    {"/detokenize", true},     {"/v1/models", false},          {"/metrics", false}};
    const Route* route = nullptr;
    for (const Route& r : kRoutes)
      if (p == r.path) route = &r;
    if (!route) return error_response(404, fmt::format("no route {} {}", req.method, p), {}, "not_found");
    if (!authorized(req)) return error_response(401, "a valid API key is required: send 'Authorization: Bearer KEY'", {}, "invalid_api_key");
    if (route->post ? !post : !get) return error_response(405, fmt::format("use {} for {}", route->post ? "POST" : "GET", p));
    if (p == "/metrics") return metrics_page();
    if (!ready_.load(std::memory_order_acquire)) return error_response(503, "the model is loading", {}, "model_loading");
    if (p == "/v1/models") return models();
    if (p == "/tokenize") return tokenize(req);
    if (p == "/detokenize") return detokenize(req);
    if (draining_.load()) return error_response(503, "the server is shutting down", {}, "shutting_down");
    return generate(req, p == "/v1/chat/completions");
  } catch (const ApiError& e) {
    return error_response(e.status(), e.what(), e.param(), e.code());
  } catch (const QueueFullError& e) {
    return error_response(429, e.what(), {}, "queue_full");
  } catch (const Error& e) {
    // submit() refuses what does not fit (the prompt and max_tokens against the context) or
    // is out of range, naming the numbers: the request's fault.
    const std::string msg = e.what();
    const bool context = msg.find("context") != std::string::npos || msg.find("KV pool") != std::string::npos;
    return error_response(400, msg, {}, context ? "context_length_exceeded" : "");
  } catch (const std::exception& e) {
    return error_response(500, fmt::format("internal error: {}", e.what()));
  }
}

HttpResponse ApiServer::models() const {
  Json data = Json::array();
  data.push_back(Json{{"id", config_.model_name},
                      {"object", "model"},
                      {"created", started_at_},
                      {"owned_by", "lumen"},
                      {"max_model_len", backend_.n_ctx}});
  return json_response(200, Json{{"object", "list"}, {"data", data}});
}

HttpResponse ApiServer::web_page(const HttpRequest& req) const {
  if (!config_.webui) return error_response(404, "the web page is off (lumen serve --no-webui)", {}, "not_found");
  if (web_assets().empty())
    return error_response(404, "this lumen was built without the web page (cmake -DLUMEN_WEBUI=OFF)", {}, "not_found");
  const WebAsset* a = find_web_asset(req.path);
  if (!a) return error_response(404, fmt::format("no route {} {}", req.method, req.path), {}, "not_found");
  HttpResponse r;
  r.content_type = std::string(a->content_type);
  // Revalidated on every load (the ETag makes that a 304), so a new binary's page shows at once.
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.headers.emplace_back("ETag", std::string(a->etag));
  // The page runs only its own script and talks only to this server: even if a model's text
  // slipped past the markdown renderer, no inline script or foreign resource would run.
  r.headers.emplace_back("Content-Security-Policy",
                         "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                         "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
  if (req.header("if-none-match") == a->etag) {
    r.status = 304;
    r.content_type.clear();
    return r;
  }
  r.body = std::string(a->body);
  return r;
}

HttpResponse ApiServer::metrics_page() const {
  HttpResponse r;
  r.content_type = "text/plain; version=0.0.4; charset=utf-8";
  if (ready_.load(std::memory_order_acquire)) {
    const EngineStats s = backend_.engine->stats();
    r.body = metrics_.render(&s, config_.model_name);
  } else {
    r.body = metrics_.render(nullptr, config_.model_name);
  }
  return r;
}

HttpResponse ApiServer::tokenize(const HttpRequest& req) {
  const TokenizeRequest t = parse_tokenize_request(parse_json_body(req.body, config_.limits));
  const Tokenizer& tok = *backend_.tokenizer;
  const std::vector<int32_t> ids = tok.encode(t.text, t.add_special, /*parse_special=*/true);
  Json tokens = Json::array();
  for (int32_t id : ids) {
    if (t.with_pieces) tokens.push_back(Json{{"id", id}, {"piece", tok.token_to_piece(id, true)}});
    else tokens.push_back(id);
  }
  return json_response(200, Json{{"tokens", tokens}, {"count", ids.size()}, {"max_model_len", backend_.n_ctx}});
}

HttpResponse ApiServer::detokenize(const HttpRequest& req) {
  const Tokenizer& tok = *backend_.tokenizer;
  const std::vector<int32_t> ids = parse_detokenize_request(parse_json_body(req.body, config_.limits), tok.n_vocab());
  const std::string text = tok.decode(ids, /*special=*/true);
  return json_response(200, Json{{"content", text}, {"prompt", text}});
}

HttpResponse ApiServer::generate(const HttpRequest& req, bool chat) {
  const Json body = parse_json_body(req.body, config_.limits);
  const Tokenizer& tok = *backend_.tokenizer;
  EngineCore& engine = *backend_.engine;
  GenerationRequest g = chat ? parse_chat_request(body, config_.limits, tok.n_vocab())
                             : parse_completion_request(body, config_.limits, tok.n_vocab());
  if (!g.model.empty() && std::find(config_.model_names.begin(), config_.model_names.end(), g.model) == config_.model_names.end())
    throw ApiError(404, fmt::format("the model '{}' does not exist (this server serves '{}')", g.model, config_.model_name), "model",
                   "model_not_found");

  // Structured output is compiled here, so a bad schema or grammar is a 400 before anything is queued.
  g.params.sampling.grammar = resolve_output_grammar(g.constraint, g.tool_request, backend_.tool_format, grammars_);

  std::vector<std::vector<int32_t>> prompts;
  std::vector<std::string> echo;
  if (chat) {
    if (!backend_.render_chat)
      throw ApiError(400, "this model has no chat template: start the server with --chat-template FILE (or chatml)", "messages");
    Json vars = Json::object();
    vars["messages"] = g.messages;
    vars["tools"] = g.tools;
    vars["documents"] = nullptr;
    vars["add_generation_prompt"] = g.add_generation_prompt;
    if (!backend_.bos_token.empty()) vars["bos_token"] = backend_.bos_token;
    if (!backend_.eos_token.empty()) vars["eos_token"] = backend_.eos_token;
    for (const auto& [k, v] : g.chat_template_kwargs.items()) vars[k] = v;
    std::string text;
    try {
      text = backend_.render_chat(vars);
    } catch (const Error& e) {
      throw ApiError(400, fmt::format("the chat template refused the conversation: {}", e.what()), "messages");
    }
    // The template writes the special tokens it wants; BOS is added only when the vocabulary
    // asks for it and the template did not write it.
    std::vector<int32_t> ids = tok.encode(text, /*add_special=*/false, /*parse_special=*/true);
    if (tok.add_bos() && tok.bos_id() >= 0 && (ids.empty() || ids[0] != tok.bos_id())) ids.insert(ids.begin(), tok.bos_id());
    prompts.push_back(std::move(ids));
  } else {
    for (const PromptInput& p : g.prompts) {
      prompts.push_back(p.is_tokens ? p.tokens : tok.encode(p.text, /*add_special=*/true, /*parse_special=*/true));
      if (g.echo) echo.push_back(p.is_tokens ? tok.decode(p.tokens) : p.text);
    }
  }
  if (!g.seed_given) g.params.sampling.seed = std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32);

  std::vector<std::shared_ptr<RequestHandle>> handles;
  std::vector<int64_t> lengths;
  try {
    for (size_t i = 0; i < prompts.size(); i++) {
      if (prompts[i].empty()) bad_request(chat ? "messages" : "prompt", "the prompt is empty (no tokens)");
      GenerationParams params = g.params;
      const int64_t len = static_cast<int64_t>(prompts[i].size());
      const int64_t room = engine.max_sequence_tokens() - len;
      if (room < 1)
        throw ApiError(400,
                       fmt::format("the prompt is {} tokens, and this server's context holds {} (prompt and completion "
                                   "together); shorten the prompt",
                                   len, engine.max_sequence_tokens()),
                       chat ? "messages" : "prompt", "context_length_exceeded");
      if (!g.max_tokens_given) {
        // OpenAI's default for completions is 16 tokens; chat runs until the context is full.
        params.sampling.max_tokens = static_cast<int32_t>(chat ? room : std::min<int64_t>(16, room));
      } else if (len + params.sampling.max_tokens > engine.max_sequence_tokens()) {
        throw ApiError(400,
                       fmt::format("this server's context holds {} tokens; the prompt is {} and max_tokens asks for {} "
                                   "more ({} in all)",
                                   engine.max_sequence_tokens(), len, params.sampling.max_tokens, len + params.sampling.max_tokens),
                       "max_tokens", "context_length_exceeded");
      }
      handles.push_back(engine.submit(prompts[i], params));
      lengths.push_back(len);
    }
  } catch (...) {
    for (auto& h : handles) h->cancel();
    throw;
  }

  ResponseContext ctx;
  ctx.id = random_id(chat ? "chatcmpl-" : "cmpl-");
  ctx.created = unix_now();
  ctx.model = config_.model_name;
  ctx.chat = chat;
  ctx.stream = g.stream;
  ctx.include_usage = g.include_usage;
  ctx.n = g.params.n;
  ctx.logprobs = g.params.logprobs;
  ctx.top_logprobs = g.params.top_logprobs;
  ctx.echo = std::move(echo);
  if (chat && g.tool_request.parses()) {
    ctx.parse_tools = true;
    ctx.tool_format = backend_.tool_format;
    for (const ToolSpec& t : g.tool_request.tools) ctx.tool_names.push_back(t.name);
  }
  ctx.tokenizer = &tok;
  ctx.metrics = &metrics_;
  HttpResponse r;
  r.stream = std::make_shared<GenerationStream>(std::move(ctx), std::move(handles), std::move(lengths));
  r.content_type = r.stream->content_type();
  return r;
}

}  // namespace lumen::server
