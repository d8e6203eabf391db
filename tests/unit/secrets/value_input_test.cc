// Tests for reading secret values: pipes (newline handling, size limit) and the hidden prompt
// on a real pseudo-terminal (no echo, terminal restored, Ctrl-C cancels).
#include "secrets/value_input.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <pty.h>
#include <signal.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <future>
#include <thread>

#include "secrets/names.h"

namespace air::secrets {
namespace {

// Feeds `data` through a pipe to ReadSecretValue.
Result<std::string> ReadFromPipe(const std::string& data, bool keep_newline) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  std::thread writer([&] {
    size_t done = 0;
    while (done < data.size()) {
      ssize_t n = ::write(fds[1], data.data() + done, data.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::close(fds[1]);
  });
  ValueInputOptions options;
  options.keep_trailing_newline = keep_newline;
  auto value = ReadSecretValue(fds[0], STDERR_FILENO, options);
  ::close(fds[0]);
  writer.join();
  return value;
}

TEST(ValueInputTest, PipedValueLosesExactlyOneTrailingNewline) {
  EXPECT_EQ(*ReadFromPipe("token\n", false), "token");
  EXPECT_EQ(*ReadFromPipe("token\r\n", false), "token");
  EXPECT_EQ(*ReadFromPipe("token\n\n", false), "token\n");
  EXPECT_EQ(*ReadFromPipe("token", false), "token");
  EXPECT_EQ(*ReadFromPipe("a\nb\n", false), "a\nb");
  EXPECT_EQ(*ReadFromPipe("token\n", true), "token\n");
  EXPECT_EQ(*ReadFromPipe("", false), "");
  std::string binary = "\x01\xff\x7f\t raw\r";
  EXPECT_EQ(*ReadFromPipe(binary, false), binary);
}

TEST(ValueInputTest, PipedValueSizeLimit) {
  EXPECT_EQ(ReadFromPipe(std::string(kMaxValueBytes, 'v') + "\r\n", false)->size(), kMaxValueBytes);
  auto too_big = ReadFromPipe(std::string(kMaxValueBytes + 3, 'v'), false);
  ASSERT_FALSE(too_big.ok());
  EXPECT_EQ(too_big.status().code(), ErrorCode::kInvalidArgument);
  EXPECT_NE(too_big.status().message().find("stdin is longer than 131072 bytes, the most"),
            std::string::npos)
      << too_big.status().message();
}

// Everything the terminal shows (the master side) within `ms`.
std::string DrainMaster(int master, int ms) {
  std::string seen;
  char buf[512];
  auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{master, POLLIN, 0};
    if (::poll(&p, 1, 20) > 0) {
      ssize_t n = ::read(master, buf, sizeof(buf));
      if (n > 0) seen.append(buf, static_cast<size_t>(n));
    }
  }
  return seen;
}

TEST(ValueInputTest, PromptDoesNotEchoAndRestoresTheTerminal) {
  int master = -1, slave = -1;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  termios before;
  ASSERT_EQ(::tcgetattr(slave, &before), 0);
  ASSERT_TRUE(before.c_lflag & ECHO);

  auto result = std::async(std::launch::async, [slave] {
    ValueInputOptions options;
    options.prompt = "Value for s/k (input hidden): ";
    return ReadSecretValue(slave, slave, options);
  });
  std::string shown = DrainMaster(master, 300);
  EXPECT_NE(shown.find("Value for s/k (input hidden): "), std::string::npos) << shown;
  const std::string typed = "hf_TYPED_secret_99\n";
  ASSERT_EQ(::write(master, typed.data(), typed.size()), static_cast<ssize_t>(typed.size()));
  auto value = result.get();
  shown += DrainMaster(master, 200);
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ(*value, "hf_TYPED_secret_99");
  EXPECT_EQ(shown.find("hf_TYPED"), std::string::npos) << "the value was echoed: " << shown;

  termios after;
  ASSERT_EQ(::tcgetattr(slave, &after), 0);
  EXPECT_TRUE(after.c_lflag & ECHO) << "echo was not restored";
  ::close(master);
  ::close(slave);
}

TEST(ValueInputTest, InterruptAtThePromptCancelsAndRestoresEcho) {
  int master = -1, slave = -1;
  ASSERT_EQ(::openpty(&master, &slave, nullptr, nullptr, nullptr), 0);
  std::promise<pthread_t> started;
  auto result = std::async(std::launch::async, [slave, &started] {
    started.set_value(::pthread_self());
    ValueInputOptions options;
    options.prompt = "Value: ";
    return ReadSecretValue(slave, slave, options);
  });
  pthread_t prompt_thread = started.get_future().get();
  DrainMaster(master, 200);  // the prompt is up and the signals are blocked
  ::write(master, "partial", 7);
  ASSERT_EQ(::pthread_kill(prompt_thread, SIGINT), 0);
  auto value = result.get();
  ASSERT_FALSE(value.ok());
  EXPECT_EQ(value.status().code(), ErrorCode::kCancelled);
  termios after;
  ASSERT_EQ(::tcgetattr(slave, &after), 0);
  EXPECT_TRUE(after.c_lflag & ECHO);
  ::close(master);
  ::close(slave);
}

}  // namespace
}  // namespace air::secrets
