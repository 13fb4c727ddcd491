// Shared `main` plumbing for resil's executables: one clear error line on stderr, documented exit
// codes (docs/exit-codes.md), progress lines on a terminal.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <functional>
#include <iostream>
#include <string>

#include "resil/core/error.hpp"

namespace resil::app {

/// The message as one line (errors print exactly one line on stderr).
inline std::string one_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  return s;
}

/// Parse-time check of a 64-bit unsigned option (seeds, trial numbers): decimal digits, or 0x and
/// hex digits, at most 2^64-1. CLI11's own conversion (strtoull) turns 2^64 and beyond into 2^64-1
/// and -1 into 2^64-1 without a word; a seed must be the one the user wrote, or refused (exit 2).
inline CLI::Validator uint64_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        const bool hex = s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
        const char* first = s.data() + (hex ? 2 : 0);
        const char* last = s.data() + s.size();
        std::uint64_t v = 0;
        const auto [ptr, ec] = std::from_chars(first, last, v, hex ? 16 : 10);
        if (first == last || *first == '+' || *first == '-' || ec == std::errc::invalid_argument || ptr != last)
          return "'" + s + "' is not a non-negative integer";
        if (ec == std::errc::result_out_of_range) return "'" + s + "' is out of range (0 to 18446744073709551615)";
        return {};
      },
      "UINT64");
}

/// Run `body` and map every failure to one line on stderr plus an exit code:
/// CLI11 parse errors -> 2 (usage), resil::Error -> its exit_code(), anything else -> 1.
inline int guarded_main(const std::string& prog, CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << prog << ": error: " << one_line(e.what()) << " (see " << prog << " --help)\n";
    return static_cast<int>(ExitCode::usage);
  }
  try {
    return body();
  } catch (const resil::Error& e) {
    std::cerr << prog << ": error: " << one_line(e.what()) << "\n";
    return exit_code_of(e);
  } catch (const std::bad_alloc&) {
    std::cerr << prog << ": error: out of memory\n";
    return static_cast<int>(ExitCode::internal);
  } catch (const std::exception& e) {
    std::cerr << prog << ": internal error: " << one_line(e.what()) << "\n";
    return static_cast<int>(ExitCode::internal);
  }
}

/// True when stderr is a terminal (progress lines are drawn only then, or when forced).
bool stderr_is_tty();

/// A single-line progress display on stderr: "label  done/total  rate  ETA", redrawn at most
/// every 0.2 s; silent when stderr is not a terminal unless RESIL_PROGRESS=1.
class Progress {
public:
  Progress(std::string label, std::uint64_t total);
  ~Progress();
  void update(std::uint64_t done, const std::string& extra = "");
  void finish(const std::string& extra = "");

private:
  std::string label_;
  std::uint64_t total_;
  double start_, last_ = -1;
  bool enabled_;
};

}  // namespace resil::app
