// Shared `main` plumbing for resil's executables: one clear error line on stderr, documented exit
// codes (docs/reference/exit-codes.md), the error policy of an MPI job, progress lines on a terminal.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <functional>
#include <iostream>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <thread>

#include "resil/core/error.hpp"

namespace resil::app {

/// The message as one line of text (errors print exactly one line on stderr): line breaks become
/// spaces; other control bytes and bytes that are not valid UTF-8 (a damaged file's strings, a
/// path in another encoding) become \xHH, so the line is readable and safe for a terminal.
inline std::string one_line(std::string_view s) {
  static constexpr char hex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  auto escape = [&](unsigned char c) { out += {'\\', 'x', hex[c >> 4], hex[c & 15]}; };
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\n' || c == '\r') {
      out += ' ';
      ++i;
      continue;
    }
    if (c < 0x20 || c == 0x7f) {
      escape(c);
      ++i;
      continue;
    }
    // Length of a well-formed UTF-8 sequence starting at c (RFC 3629: no overlongs, no surrogates).
    std::size_t n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (n > 1) {
      if (i + n > s.size()) n = 0;
      for (std::size_t k = 1; n && k < n; ++k)
        if ((static_cast<unsigned char>(s[i + k]) & 0xc0) != 0x80) n = 0;
      const auto c1 = n ? static_cast<unsigned char>(s[i + 1]) : 0;
      if ((c == 0xe0 && c1 < 0xa0) || (c == 0xed && c1 > 0x9f) || (c == 0xf0 && c1 < 0x90) || (c == 0xf4 && c1 > 0x8f)) n = 0;
    }
    if (n == 0) {
      escape(c);
      ++i;
      continue;
    }
    out.append(s.substr(i, n));
    i += n;
  }
  return out;
}

/// Print `<prog>: error: <what>` (as one line) with a single write, so that the lines of several
/// MPI ranks sharing a stderr pipe never interleave, and flushed: under mpiexec the line must be out
/// of this process before MPI_Abort or MPI_Finalize ends it (a line written in pieces was cut to
/// "ec-train").
inline void print_error(const std::string& prog, std::string_view what, std::string_view kind = "error") {
  const std::string line = prog + ": " + std::string(kind) + ": " + one_line(what) + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

/// An error every rank of the job reached alike (a decision all ranks make from the same data, or
/// an outcome they exchanged): every rank returns its exit code, none calls MPI_Abort, and only the
/// reporting rank prints the line, so the job's error is printed once.
struct Agreed {
  bool report = false;     // this rank prints the line
  bool with_rank = false;  // prefix "rank N: " on ranks other than 0 (the message does not name the rank)
};

/// The ranks of an MPI job as guarded_main sees them. The default is a single process.
struct Ranks {
  int rank = 0;
  int size = 1;
  std::function<int(int)> allreduce_max;  // collective: the maximum of the ranks' values
  std::function<void(int)> abort;         // ends every rank of the job with this exit code (MPI_Abort)
  // The program's agreed errors (its own exception types); nullopt: seen by this rank alone.
  std::function<std::optional<Agreed>(const resil::Error&)> agreed;
};

/// Run `body` and map every failure to one line on stderr plus an exit code:
/// CLI11 parse errors -> 2 (usage), resil::Error -> its exit_code(), anything else -> 1.
///
/// Under MPI (`ranks.size > 1`) the ranks first agree on the command line: a parse error is printed
/// once, by rank 0 (or, when only other ranks failed, e.g. a file check that differs between nodes,
/// by each of those with its rank), and every rank exits 2; help is printed by rank 0 alone. An error
/// that escapes `body` and that `ranks.agreed` classifies as agreed is printed by its reporter alone
/// and every rank returns its code. Any other was seen by this rank alone: it is printed with the
/// rank and the job ends with MPI_Abort and its code, since the other ranks may wait in a
/// collective forever.
inline int guarded_main(const std::string& prog, CLI::App& app, int argc, char** argv, const std::function<int()>& body,
                        const Ranks& ranks) {
  const bool mpi = ranks.size > 1 && ranks.allreduce_max && ranks.abort;
  const std::string who = mpi && ranks.rank != 0 ? "rank " + std::to_string(ranks.rank) + ": " : "";
  std::ostream null_out(nullptr);  // help and version on ranks other than 0
  std::ostream& out = ranks.rank == 0 ? std::cout : null_out;
  int parse_code = 0;
  bool done = false;  // help or version: nothing to run
  std::string parse_msg;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    parse_code = app.exit(e, out, out);
    done = true;
  } catch (const CLI::CallForAllHelp& e) {
    parse_code = app.exit(e, out, out);
    done = true;
  } catch (const CLI::CallForVersion& e) {
    parse_code = app.exit(e, out, out);
    done = true;
  } catch (const CLI::ParseError& e) {
    parse_msg = std::string(e.what()) + " (see " + prog + " --help)";
    parse_code = static_cast<int>(ExitCode::usage);
  } catch (const std::exception& e) {  // a validator or callback that threw
    parse_msg = e.what();
    parse_code = static_cast<int>(ExitCode::usage);
  }
  const bool failed = !done && parse_code != 0;
  if (mpi) {
    // 2: rank 0 failed (it alone reports), 1: only other ranks failed (each reports itself).
    const int agreed = ranks.allreduce_max(failed ? (ranks.rank == 0 ? 2 : 1) : 0);
    if (agreed != 0) {
      if (failed && (agreed == 1 || ranks.rank == 0)) print_error(prog, who + parse_msg);
      return static_cast<int>(ExitCode::usage);
    }
  } else if (failed) {
    print_error(prog, parse_msg);
  }
  if (done || failed) return parse_code;
  auto fail = [&](std::string_view kind, const std::string& what, int code) {
    print_error(prog, (mpi ? "rank " + std::to_string(ranks.rank) + ": " : std::string()) + what, kind);
    if (mpi) {
      // mpiexec forwards a rank's stderr through its process manager; MPI_Abort tears the job down at
      // once and can drop a line still on its way. Give the line time to arrive first.
      std::cerr.flush();
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      ranks.abort(code);
    }
    return code;
  };
  try {
    return body();
  } catch (const resil::Error& e) {
    if (const auto a = ranks.agreed ? ranks.agreed(e) : std::nullopt) {
      if (a->report) print_error(prog, (a->with_rank ? who : std::string()) + e.what());
      return exit_code_of(e);
    }
    return fail("error", e.what(), exit_code_of(e));
  } catch (const std::filesystem::filesystem_error& e) {  // a path that cannot be created, read or renamed
    return fail("error", e.what(), static_cast<int>(ExitCode::io));
  } catch (const std::bad_alloc&) {
    return fail("error", "out of memory", static_cast<int>(ExitCode::internal));
  } catch (const std::exception& e) {
    return fail("internal error", e.what(), static_cast<int>(ExitCode::internal));
  }
}

/// A single process (or a program that reports its MPI errors itself).
inline int guarded_main(const std::string& prog, CLI::App& app, int argc, char** argv, const std::function<int()>& body) {
  return guarded_main(prog, app, argc, argv, body, Ranks{});
}

/// True when stderr is a terminal (progress lines are drawn only then, or when forced).
bool stderr_is_tty();

/// Progress on stderr, "label done/total (pct) elapsed, ETA": on a terminal one line redrawn at most
/// every 0.2 s; elsewhere (a batch job's log) a plain line after 30 s, then at doubling intervals up
/// to one every 10 minutes (RESIL_PROGRESS_SECONDS=S: the first after S seconds). RESIL_PROGRESS=1 draws
/// the terminal line anywhere, RESIL_PROGRESS=0 prints none.
class Progress {
public:
  Progress(std::string label, std::uint64_t total);
  ~Progress();
  void update(std::uint64_t done, const std::string& extra = "");
  void finish(const std::string& extra = "");
  /// `n` of the total were done before this run (a resumed campaign): the ETA is then taken from
  /// the rate of the work done since, not from a count that includes them.
  void done_before(std::uint64_t n) { before_ = n; }

private:
  std::string label_;
  std::uint64_t total_, before_ = 0;
  enum class Mode { off, terminal, log };
  double start_, last_ = -1;
  double log_every_ = 30.0, next_log_ = 30.0;  // log mode: seconds between lines, and when the next is due
  Mode mode_;
};

}  // namespace resil::app
