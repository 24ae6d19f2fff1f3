// HttpServer: HTTP/1.1 over Boost.Beast/Asio, asynchronous, for many slow or hostile clients.
//
// A few I/O threads serve every connection as a state machine, so a connection that trickles
// its request in (slow loris), or never reads its response, costs a socket and a few kilobytes,
// never a thread. Every request must arrive whole within `timeout_s` of its first wait (idle
// keep-alive connections close at the same deadline), headers and bodies are bounded, and the
// number of connections is capped; what breaks a rule gets its status (400, 408, 413, 431, 503)
// and the connection is closed.
//
// Handlers run on an I/O thread and must only parse, validate and hand work on: a response
// that another thread produces later (the engine's tokens) is a ResponseStream, which the
// connection drains whenever the producer signals, without blocking. A client that goes away
// while its response is pending is noticed at once (a read is kept pending during the response)
// and the stream is cancelled.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace lumen::server {

struct HttpLimits {
  size_t max_header_bytes = 16 * 1024;     // request line and headers
  size_t max_body_bytes = 8u << 20;        // --max-body
  double timeout_s = 30;                   // --timeout: to receive a request, or to send a write
  size_t max_connections = 512;            // more are answered 503 and closed
  int threads = 2;                         // I/O threads
};

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // the target without its query
  std::string query;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case
  std::string body;
  std::string header(std::string_view lower_name) const;   // "" when absent
};

// A response body that another thread produces. The connection calls poll() on its I/O thread
// after set_listener() and again each time the listener fires; the producer fires it (from any
// thread) whenever poll() may have something new.
class ResponseStream {
 public:
  virtual ~ResponseStream() = default;
  struct Chunk {
    std::string data;
    bool done = false;
    int status = 200;  // a whole (not streamed) response: its status, read when done
  };
  // Streamed: status 200 and the headers go out at once, then the body in chunks as they come
  // (server-sent events). Otherwise the whole body goes out when done, with the final status.
  virtual bool streamed() const = 0;
  virtual std::string content_type() const = 0;
  virtual void set_listener(std::function<void()> wake) = 0;
  virtual Chunk poll() = 0;
  // The client went away (or the server is closing the connection) before done.
  virtual void cancel() = 0;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
  std::shared_ptr<ResponseStream> stream;  // set: the body comes from the stream
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;
// The body of a response the server gives before any handler runs (400 malformed request, 408,
// 413, 431, 503 too many connections), so it has the API's error shape.
using HttpErrorResponder = std::function<HttpResponse(int status, const std::string& message)>;

class HttpServer {
 public:
  // on_status sees the status of every response sent (metrics), on an I/O thread.
  HttpServer(HttpLimits limits, HttpHandler handler, HttpErrorResponder error_response,
             std::function<void(int status)> on_status = {});
  ~HttpServer();  // stop()
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; port 0 picks a free one. Returns the bound port. Error when it cannot.
  int listen(const std::string& host, int port);
  void start();           // the I/O threads
  void stop_accepting();  // new connections are refused; open ones go on
  void stop();            // closes every connection (pending streams are cancelled), joins
  size_t connections() const;     // open connections
  size_t open_responses() const;  // responses whose stream is not yet fully sent

  struct Impl;  // the I/O context, acceptor and counters (http_server.cpp); its connections see it

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace lumen::server
