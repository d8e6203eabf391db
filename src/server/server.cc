// The server's lifecycle: one instance per AIR_HOME (flock), bind, server.json, auth, shutdown
// on SIGTERM/SIGINT; and the shared JSON/error helpers.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sodium.h>
#include <sys/file.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <thread>

#include "base/log.h"
#include "base/strings.h"
#include "server/server_internal.h"

namespace air::server {

Result<DbPool::Lease> DbPool::Acquire() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!idle_.empty()) {
      auto store = std::move(idle_.back());
      idle_.pop_back();
      return Lease(this, std::move(store));
    }
  }
  AIR_ASSIGN_OR_RETURN(auto store, store::Store::Open(db_path_, env_));
  return Lease(this, std::move(store));
}

void DbPool::Return(std::unique_ptr<store::Store> store) {
  std::lock_guard<std::mutex> lock(mu_);
  idle_.push_back(std::move(store));
}

const char* MlflowErrorCode(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kNotFound:
      return "RESOURCE_DOES_NOT_EXIST";
    case ErrorCode::kAlreadyExists:
      return "RESOURCE_ALREADY_EXISTS";
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kFailedPrecondition:
      return "INVALID_PARAMETER_VALUE";
    case ErrorCode::kPermissionDenied:
      return "PERMISSION_DENIED";
    case ErrorCode::kUnavailable:
      return "TEMPORARILY_UNAVAILABLE";
    case ErrorCode::kResourceExhausted:
      return "RESOURCE_EXHAUSTED";
    default:
      return "INTERNAL_ERROR";
  }
}

int HttpStatusFor(const Status& status) {
  switch (status.code()) {
    case ErrorCode::kNotFound:
      return 404;
    case ErrorCode::kAlreadyExists:
    case ErrorCode::kInvalidArgument:
    case ErrorCode::kFailedPrecondition:
      return 400;
    case ErrorCode::kPermissionDenied:
      return 403;
    case ErrorCode::kUnavailable:
      return 503;
    case ErrorCode::kResourceExhausted:
      return 429;
    default:
      return 500;
  }
}

void SendJson(httplib::Response& res, const nlohmann::json& body, int status) {
  res.status = status;
  res.set_content(body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                  "application/json");
}

void SendError(httplib::Response& res, int http_status, const std::string& error_code,
               const std::string& message) {
  SendJson(res, {{"error_code", error_code}, {"message", message}}, http_status);
}

void SendError(httplib::Response& res, const Status& status) {
  SendError(res, HttpStatusFor(status), MlflowErrorCode(status), status.message());
}

namespace {

// Constant-time comparison of the presented token with the expected one.
bool TokenMatches(const std::string& presented, const std::string& expected) {
  if (presented.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  }
  return diff == 0;
}

// The password of an "Authorization: Basic base64(user:password)" header, or "".
std::string BasicPassword(const std::string& auth) {
  if (!StartsWith(auth, "Basic ")) return "";
  std::string encoded = auth.substr(6);
  std::string decoded(encoded.size(), '\0');
  size_t length = 0;
  if (sodium_base642bin(reinterpret_cast<unsigned char*>(decoded.data()), decoded.size(),
                        encoded.c_str(), encoded.size(), nullptr, &length, nullptr,
                        sodium_base64_VARIANT_ORIGINAL) != 0) {
    return "";
  }
  decoded.resize(length);
  size_t colon = decoded.find(':');
  return colon == std::string::npos ? "" : decoded.substr(colon + 1);
}

bool Authorized(const httplib::Request& req, const std::string& token) {
  if (token.empty()) return true;
  std::string auth = req.get_header_value("Authorization");
  if (StartsWith(auth, "Bearer ") && TokenMatches(auth.substr(7), token)) return true;
  // Basic auth with the token as the password (any user name): MLFLOW_TRACKING_USERNAME and
  // MLFLOW_TRACKING_PASSWORD for the mlflow client.
  if (std::string password = BasicPassword(auth); !password.empty()) {
    return TokenMatches(password, token);
  }
  // The browser UI passes the token once as ?token=...; it is then kept in a cookie.
  if (req.has_param("token") && TokenMatches(req.get_param_value("token"), token)) return true;
  std::string cookie = req.get_header_value("Cookie");
  for (const std::string& part : Split(cookie, ';')) {
    std::string_view kv = Trim(part);
    if (StartsWith(kv, "air_token=") && TokenMatches(std::string(kv.substr(10)), token)) {
      return true;
    }
  }
  return false;
}

// Holds AIR_HOME/tracking/server.lock for the server's lifetime.
Result<int> LockServer(const tracking::ServerFiles& files) {
  int fd = ::open(files.LockPath().c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus("open " + files.LockPath(), errno);
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    int err = errno;
    ::close(fd);
    if (err == EWOULDBLOCK) {
      return AlreadyExists(
          fmt::format("another air server already serves this AIR_HOME ({})", files.LockPath()));
    }
    return ErrnoStatus("flock " + files.LockPath(), err);
  }
  return fd;
}

// The UI's files: $AIR_WEB_DIR, else an installed air's <prefix>/share/air/web beside its
// bin/ (pip install ./python), else the source tree's web/ (compiled in).
std::string FindWebDir(Env* env) {
  if (auto dir = env->GetEnv("AIR_WEB_DIR"); dir && !dir->empty()) return *dir;
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n > 0) {
    const std::string path(exe, static_cast<size_t>(n));
    const std::string installed = path.substr(0, path.rfind('/')) + "/../share/air/web";
    if (env->IsDirectory(installed)) return installed;
  }
  return AIR_SOURCE_WEB_DIR;
}

}  // namespace

Status RunServer(const ServerOptions& options, Env* env,
                 const std::function<void(const std::string& url)>& on_listening) {
  if (options.air_home.empty()) return InvalidArgument("AIR_HOME is empty");
  if (!tracking::IsLoopbackHost(options.host) && options.token.empty()) {
    return InvalidArgument(
        fmt::format("binding {} (not loopback) needs an access token; air server creates one in "
                    "AIR_HOME/tracking/server.token",
                    options.host));
  }
  tracking::ServerFiles files(options.air_home);
  AIR_RETURN_IF_ERROR(env->CreateDirs(options.air_home, 0700));
  AIR_RETURN_IF_ERROR(env->CreateDirs(files.dir, 0700));
  AIR_RETURN_IF_ERROR(env->CreateDirs(files.ArtifactsDir(), 0700));
  AIR_ASSIGN_OR_RETURN(int lock_fd, LockServer(files));

  ServerContext ctx{options,
                    env,
                    options.air_home,
                    files,
                    DbPool(options.air_home + "/air.db", env),
                    FindWebDir(env),
                    "/usr/share/javascript/chart.js/chart.min.js"};
  {
    // Creates and migrates the store before the first request.
    AIR_ASSIGN_OR_RETURN(auto lease, ctx.pool.Acquire());
  }

  httplib::Server http;
  std::atomic<int64_t> last_request_us{env->MonotonicMicros()};
  const int threads = options.threads;
  http.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  http.set_keep_alive_max_count(100000);
  // One small request per metric (log_metric): without TCP_NODELAY, Nagle's algorithm and the
  // client's delayed ACK add ~40 ms to each.
  http.set_tcp_nodelay(true);
  http.set_payload_max_length(size_t{1} << 32);
  http.set_pre_routing_handler(
      [&ctx, &last_request_us](const httplib::Request& req, httplib::Response& res) {
        last_request_us.store(ctx.env->MonotonicMicros());
        if (req.path == "/health") return httplib::Server::HandlerResponse::Unhandled;
        if (!Authorized(req, ctx.options.token)) {
          SendError(res, 401, "UNAUTHENTICATED",
                    "this air server needs its access token: send 'Authorization: Bearer <token>' "
                    "(MLFLOW_TRACKING_TOKEN for the mlflow client), or basic auth with the token "
                    "as the password (MLFLOW_TRACKING_USERNAME, MLFLOW_TRACKING_PASSWORD)");
          return httplib::Server::HandlerResponse::Handled;
        }
        return httplib::Server::HandlerResponse::Unhandled;
      });
  http.set_error_handler([](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {
      SendError(res, 404, "ENDPOINT_NOT_FOUND",
                fmt::format("No API endpoint {} {} (docs/tracking.md lists what air serves)",
                            req.method, req.path));
    } else {
      SendError(res, res.status, "BAD_REQUEST", fmt::format("HTTP {}", res.status));
    }
  });
  http.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown exception";
        try {
          std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        SendError(res, 500, "INTERNAL_ERROR", "air server: " + what);
      });
  http.Get("/health", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("OK", "text/plain");
  });
  RegisterMlflowRoutes(http, ctx);
  RegisterArtifactRoutes(http, ctx);
  RegisterAirRoutes(http, ctx);
  RegisterWebRoutes(http, ctx);

  int port = options.port;
  if (port == 0) {
    // The port of the last run keeps MLFLOW_TRACKING_URI of running nodes valid across a
    // restart; any free port otherwise.
    if (auto previous = tracking::ReadServerInfo(files, env);
        previous && previous->host == options.host &&
        http.bind_to_port(options.host, previous->port)) {
      port = previous->port;
    } else {
      port = http.bind_to_any_port(options.host);
    }
  } else if (!http.bind_to_port(options.host, port)) {
    port = -1;
  }
  if (port <= 0) {
    ::close(lock_fd);
    return Unavailable(
        fmt::format("air server: cannot listen on {}:{}", options.host, options.port));
  }
  tracking::ServerInfo info;
  info.pid = ::getpid();
  info.host = options.host;
  info.port = port;
  std::string url_host =
      options.host.find(':') != std::string::npos ? "[" + options.host + "]" : options.host;
  if (url_host == "0.0.0.0") url_host = "127.0.0.1";
  info.url = fmt::format("http://{}:{}", url_host, port);
  info.token_required = !options.token.empty();
  AIR_RETURN_IF_ERROR(tracking::WriteServerInfo(files, info, env));

  // SIGTERM/SIGINT/SIGHUP stop the server; a thread waits for them, and checks once a second
  // whether the daemon should retire (idle_exit_seconds, server.json gone).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGHUP);
  ::pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::atomic<bool> done{false};
  std::thread waiter([&http, &ctx, &done, set, &last_request_us, pid = info.pid] {
    const timespec tick{1, 0};
    while (!done.load()) {
      if (sigtimedwait(&set, nullptr, &tick) > 0) break;
      auto current = tracking::ReadServerInfo(ctx.files, ctx.env);
      if (!current || current->pid != pid) break;
      int idle = ctx.options.idle_exit_seconds;
      if (idle > 0 && ctx.env->MonotonicMicros() - last_request_us.load() > idle * 1'000'000LL) {
        auto lease = ctx.pool.Acquire();
        store::RunFilter live;
        live.include_terminal = false;
        live.limit = 1;
        auto runs = lease.ok() ? (*lease)->ListRuns(live)
                               : Result<std::vector<store::RunRecord>>(lease.status());
        if (runs.ok() && runs->empty()) break;
        last_request_us.store(ctx.env->MonotonicMicros());
      }
    }
    http.stop();
  });
  AIR_INFO("air server for {} listening on {}", options.air_home, info.url);
  if (on_listening) on_listening(info.url);
  bool ok = http.listen_after_bind();
  done.store(true);
  waiter.join();
  ::close(lock_fd);
  if (!ok) return Unavailable("air server: the listening socket failed");
  return Status::Ok();
}

}  // namespace air::server
