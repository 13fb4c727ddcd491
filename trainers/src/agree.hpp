// agree(): run one phase on every rank and agree on its outcome, so no rank is left waiting in a
// collective when another failed (see PeerError). Private to the trainer.
#pragma once

#include <chrono>
#include <exception>
#include <filesystem>
#include <string>

#include "resil/train/trainer.hpp"

namespace resil::train {

inline double now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

/// Run `fn` on every rank and agree on failure, so no rank hangs in a collective. One process:
/// the error itself. Several: every rank throws a PeerError with the job's exit code (the highest
/// of the failing ranks'); it is reported once by rank 0 when every rank failed (the same check on
/// the same input), otherwise by each failing rank, prefixed with its rank (its own shard, file or
/// memory: "rank 0: ..." too); ranks that did not fail stay silent. `for_job`: a check rank 0
/// makes for the whole job (its outputs): reported like one every rank failed.
template <class Fn>
void agree(const Comm& comm, Fn&& fn, bool for_job = false) {
  int code = 0;
  std::exception_ptr err;
  std::string what;
  try {
    fn();
  } catch (const Error& e) {
    code = static_cast<int>(e.exit_code());
    err = std::current_exception();
    what = e.what();
  } catch (const std::filesystem::filesystem_error& e) {
    code = static_cast<int>(ExitCode::io);
    err = std::make_exception_ptr(IoError(e.what()));
    what = e.what();
  } catch (const std::exception& e) {
    code = static_cast<int>(ExitCode::internal);
    err = std::current_exception();
    what = e.what();
  }
  if (comm.size() == 1) {
    if (err) std::rethrow_exception(err);
    return;
  }
  const int any = comm.allreduce_max(code);
  if (any == 0) return;
  const bool every = comm.allreduce_max(err ? 0 : 1) == 0;
  const int last = comm.allreduce_max(err ? comm.rank() : -1);
  const auto job_code = static_cast<ExitCode>(any);
  if (!err) throw PeerError("rank " + std::to_string(last) + " failed (it reported why)", job_code);
  if (every || for_job) throw PeerError(what, job_code, comm.rank() == 0);
  throw PeerError("rank " + std::to_string(comm.rank()) + ": " + what, job_code, true);
}

}  // namespace resil::train
