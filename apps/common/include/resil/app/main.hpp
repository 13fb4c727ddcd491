// Shared `main` plumbing for resil's executables: one clear error line on stderr, documented exit
// codes (docs/exit-codes.md), progress lines on a terminal.
#pragma once

#include <CLI/CLI.hpp>

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
