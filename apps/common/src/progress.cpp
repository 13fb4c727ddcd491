#include <unistd.h>

#include <algorithm>
#include <cerrno>  // program_invocation_short_name
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>

#include "resil/app/main.hpp"

namespace resil::app {

namespace {
/// Seconds left at the rate of the `done - before` items finished in `elapsed` seconds.
double eta(double elapsed, std::uint64_t done, std::uint64_t before, std::uint64_t total) {
  if (done <= before || done >= total) return 0.0;
  return elapsed * static_cast<double>(total - done) / static_cast<double>(done - before);
}
double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
/// A duration for a log line: "42.5 s", "12m05s", "3h07m".
std::string duration(double s) {
  char b[32];
  if (s < 100.0) {
    std::snprintf(b, sizeof b, "%.1f s", s);
  } else if (s < 3600.0) {
    const long m = static_cast<long>(s);
    std::snprintf(b, sizeof b, "%ldm%02lds", m / 60, m % 60);
  } else {
    const long m = static_cast<long>(s / 60.0);
    std::snprintf(b, sizeof b, "%ldh%02ldm", m / 60, m % 60);
  }
  return b;
}
}  // namespace

bool stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string label, std::uint64_t total)
    : label_(std::move(label)), total_(total), start_(now()) {
  const char* force = std::getenv("RESIL_PROGRESS");
  const std::string f = force ? force : "";
  mode_ = f == "1" ? Mode::terminal : f == "0" ? Mode::off : stderr_is_tty() ? Mode::terminal : Mode::log;
  if (const char* s = std::getenv("RESIL_PROGRESS_SECONDS")) {  // log mode: when the first line comes
    char* end = nullptr;
    const double v = std::strtod(s, &end);
    if (end != s && *end == '\0' && v >= 0.1 && v <= 86400.0) {
      log_every_ = next_log_ = v;
    } else {
      static bool warned = false;  // once per process, however many progress displays it makes
      if (!std::exchange(warned, true))
        std::fprintf(stderr, "%s: warning: RESIL_PROGRESS_SECONDS='%s' ignored: expected seconds in 0.1..86400 (30 is used)\n",
                     program_invocation_short_name, s);
    }
  }
}

Progress::~Progress() = default;

void Progress::update(std::uint64_t done, const std::string& extra) {
  if (mode_ == Mode::off) return;
  const double t = now();
  if (mode_ == Mode::log) {
    const double el = t - start_;
    if (el < next_log_ || done >= total_) return;  // the command prints its own end
    std::fprintf(stderr, "%s %llu/%llu (%.0f%%) %s elapsed, ETA %s%s%s\n", label_.c_str(), static_cast<unsigned long long>(done),
                 static_cast<unsigned long long>(total_), total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0,
                 duration(el).c_str(), duration(eta(el, done, before_, total_)).c_str(), extra.empty() ? "" : ": ", extra.c_str());
    std::fflush(stderr);
    log_every_ = std::min(2.0 * log_every_, 600.0);
    next_log_ = el + log_every_;
    return;
  }
  if (done < total_ && t - last_ < 0.2) return;
  last_ = t;
  const double el = t - start_;
  std::fprintf(stderr, "\r%s %llu/%llu (%.0f%%) %.1fs elapsed, ETA %.1fs %s\033[K", label_.c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
               total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0, el, eta(el, done, before_, total_), extra.c_str());
  std::fflush(stderr);
}

void Progress::finish(const std::string& extra) {
  if (mode_ != Mode::terminal) return;
  last_ = -1;
  update(total_, extra);
  std::fprintf(stderr, "\n");
}

}  // namespace resil::app
