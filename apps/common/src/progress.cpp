#include <unistd.h>

#include <chrono>
#include <cstdlib>

#include "resil/app/main.hpp"

namespace resil::app {

namespace {
double now() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

bool stderr_is_tty() { return ::isatty(STDERR_FILENO) == 1; }

Progress::Progress(std::string label, std::uint64_t total)
    : label_(std::move(label)), total_(total), start_(now()) {
  const char* force = std::getenv("RESIL_PROGRESS");
  enabled_ = force ? std::string(force) == "1" : stderr_is_tty();
}

Progress::~Progress() = default;

void Progress::update(std::uint64_t done, const std::string& extra) {
  if (!enabled_) return;
  const double t = now();
  if (done < total_ && t - last_ < 0.2) return;
  last_ = t;
  const double el = t - start_;
  const double eta = done > 0 ? el * static_cast<double>(total_ - done) / static_cast<double>(done) : 0.0;
  std::fprintf(stderr, "\r%s %llu/%llu (%.0f%%) %.1fs elapsed, ETA %.1fs %s\033[K", label_.c_str(),
               static_cast<unsigned long long>(done), static_cast<unsigned long long>(total_),
               total_ ? 100.0 * static_cast<double>(done) / static_cast<double>(total_) : 100.0, el, eta, extra.c_str());
  std::fflush(stderr);
}

void Progress::finish(const std::string& extra) {
  if (!enabled_) return;
  last_ = -1;
  update(total_, extra);
  std::fprintf(stderr, "\n");
}

}  // namespace resil::app
