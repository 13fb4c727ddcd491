// The one resil error hierarchy. Every error maps to a documented process exit code
// (docs/reference/exit-codes.md); `main` catches resil::Error at the top and returns exit_code().
#pragma once

#include <stdexcept>
#include <string>

namespace resil {

enum class ExitCode : int {
  ok = 0,
  internal = 1,         // a bug or an unexpected library failure
  usage = 2,            // bad command line or configuration
  io = 3,               // a file cannot be opened, read, written or renamed
  corrupt_input = 4,    // not HDF5, truncated, unsupported dtype, malformed log/data file
  nothing_selected = 5, // a selection matched no dataset / no stored bit
  numeric = 6,          // NaN/Inf appeared in loss or weights during training
  mismatch = 7,         // resume/eval against an incompatible checkpoint (model, world size, mode)
  data_loss = 8,        // more erasures than the code tolerates, and no fallback
  mpi = 9,              // an MPI call failed
  suspect = 10,         // `ckpt-flip scan` found suspicious values (not an error, a verdict)
  preempted = 75,       // checkpointed at a step boundary after SIGTERM/SIGUSR1 (EX_TEMPFAIL)
};

class Error : public std::runtime_error {
public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
  virtual ExitCode exit_code() const noexcept { return ExitCode::internal; }
  /// Throw an error of this one's class and exit code with another message.
  [[noreturn]] virtual void rethrow_with(const std::string& what) const { throw Error(what); }
};

#define RESIL_DEFINE_ERROR(Name, Code)                                                    \
  class Name : public Error {                                                             \
  public:                                                                                 \
    explicit Name(const std::string& what) : Error(what) {}                               \
    ExitCode exit_code() const noexcept override { return ExitCode::Code; }               \
    [[noreturn]] void rethrow_with(const std::string& w) const override { throw Name(w); } \
  }

RESIL_DEFINE_ERROR(UsageError, usage);
RESIL_DEFINE_ERROR(IoError, io);
RESIL_DEFINE_ERROR(CorruptInputError, corrupt_input);
RESIL_DEFINE_ERROR(NothingSelectedError, nothing_selected);
RESIL_DEFINE_ERROR(NumericError, numeric);
RESIL_DEFINE_ERROR(MismatchError, mismatch);
RESIL_DEFINE_ERROR(DataLossError, data_loss);
RESIL_DEFINE_ERROR(MpiError, mpi);
RESIL_DEFINE_ERROR(CudaError, internal);
RESIL_DEFINE_ERROR(EcError, internal);
/// Work stopped by SIGINT/SIGTERM after committing what it had done (a campaign's recorded trials):
/// the same command continues it (exit 75, EX_TEMPFAIL, like a preempted training run).
RESIL_DEFINE_ERROR(StoppedError, preempted);

#undef RESIL_DEFINE_ERROR

/// HDF5 failures: the message carries the HDF5 error stack, the file and the object path.
/// A failure to open/parse a file is corrupt input; other HDF5 failures are I/O errors.
class Hdf5Error : public Error {
public:
  Hdf5Error(const std::string& what, ExitCode code = ExitCode::io) : Error(what), code_(code) {}
  ExitCode exit_code() const noexcept override { return code_; }
  [[noreturn]] void rethrow_with(const std::string& w) const override { throw Hdf5Error(w, code_); }

private:
  ExitCode code_;
};

/// Rethrow `e` (same class and exit code) with every `from` in its message replaced by `to`: an
/// error met while working on a temporary copy names the user's file, not `.NAME.tmp.PID`.
[[noreturn]] inline void rethrow_renamed(const Error& e, const std::string& from, const std::string& to) {
  std::string what = e.what();
  if (!from.empty())
    for (std::size_t pos = 0; (pos = what.find(from, pos)) != std::string::npos; pos += to.size()) what.replace(pos, from.size(), to);
  e.rethrow_with(what);
  throw Error(what);  // not reached: every rethrow_with throws (the attribute is not inherited)
}

inline int exit_code_of(const Error& e) noexcept { return static_cast<int>(e.exit_code()); }

}  // namespace resil
